/* The Python of system_run_python: the wrapper that python3 -c runs, and
 * the warm interpreter (cm_exec_warm) that runs the same parts forked, one
 * child per call.  Both are built from the same functions, so a call gives
 * the same document whichever ran it:
 *   run()     the child: stdin from /dev/null, stdout and stderr on two
 *             memfds, the memory limit (RLIMIT_AS), the code compiled as
 *             <code> and run as __main__ in a fresh namespace; `_` as JSON
 *             (else its repr) on a third memfd that nothing the code prints
 *             reaches; os._exit.
 *   report()  the parent, once the child ended: the document
 *             {output, error, truncated, [timed_out], success, [result]}.
 *
 * The wrapper (python3 -c WRAPPER LIMIT CAP TIMEOUT, the code on stdin):
 * forks run(), kills it at TIMEOUT (SIGALRM) and prints report(); on
 * timeout it then waits for the exec's own timeout to kill its whole tree.
 *
 * The zygote (python3 -c ZYGOTE, its stdin the request socket of
 * backend/native/zygote.c): imports what both need once and keeps one
 * child forked ahead, the spare, which becomes a session leader, a child
 * subreaper (so the call's whole tree stays below it) and dies with the
 * zygote (PR_SET_PDEATHSIG), closes every fd but its memfds and its socket,
 * puts its stdio on the memfds and runs a little code of its own, then
 * waits.  Per request (workdir, LIMIT, CAP, TIMEOUT; fds stdin, stdout,
 * stderr, call socket) the zygote checks that it can chdir there and hands
 * the spare the workdir, LIMIT, CAP and the stdin memfd (a spare found
 * dead is replaced once, else 'f'); the spare chdirs, reads the code and
 * runs run().  The zygote reaps it, writes report() on the call's stdout
 * and the exit code on the call socket, and only then forks the next spare
 * and runs its own report path on an empty memfd (zwarm): a fork right
 * after a hand-off would hold the report up by the fork and its page
 * faults.  At TIMEOUT, on 'k' or when the server hangs up, it kills the
 * call's tree the way backend/native/tree.c does (stop the child; SIGKILL
 * everything below it, again until only zombies are left; then the child).
 * It never runs the code itself, so nothing a call changes in its
 * interpreter (sys, modules, globals) reaches the next one: each starts
 * from a fork of it, made before the call.
 * On this VM a page fault is the dearest thing a call does.  Before its
 * hello the zygote runs warm() (the compiler, json, the allocator's arenas,
 * on text of its own) and gc.freeze()s, so a child faults in about half as
 * many pages; and since every page a process writes after a fork faults,
 * the spare runs warm() again and the zygote zwarm() between calls, so an
 * agent's call, which comes seconds after the last one, finds both
 * processes' pages their own (print(1), 50 ms apart, old and new
 * interleaved under load: 24-27 ms before the spare, 8-9 ms with it; back
 * to back the fork is still on the path).  The spare is a python3 the
 * sandbox's code can see and kill, like the zygote.  Differences no result shows: every
 * call of a zygote shares its hash seed (random, tempfile and the like
 * reseed after fork), and the zygote's objects sit in the collector's
 * permanent generation (gc.get_freeze_count()). */
#include "tools/python.h"

#define SHARED                                                                                                         \
        "import json,os,signal,sys,traceback\n"                                                                        \
        "def stdio(fo,fe):\n"                                                                                          \
        " nul=os.open('/dev/null',os.O_RDONLY);os.dup2(nul,0);os.dup2(fo,1);os.dup2(fe,2)\n"                           \
        " os.close(nul);os.close(fo);os.close(fe)\n"                                                                   \
        "def run(code,lim,cap,fr):\n"                                                                                  \
        " import resource\n"                                                                                           \
        " resource.setrlimit(resource.RLIMIT_AS,(lim,lim))\n"                                                          \
        " g={'__name__':'__main__','__builtins__':__builtins__};d={'ok':True}\n"                                       \
        " try:\n"                                                                                                      \
        "  exec(compile(code,'<code>','exec'),g)\n"                                                                    \
        " except SystemExit as e:\n"                                                                                   \
        "  d['ok']=e.code is None or e.code==0\n"                                                                      \
        "  if not d['ok']:print('SystemExit: %r'%(e.code,),file=sys.stderr)\n"                                         \
        " except BaseException as e:\n"                                                                                \
        "  d['ok']=False\n"                                                                                            \
        "  traceback.print_exception(type(e),e,e.__traceback__.tb_next)\n"                                             \
        " try:sys.stdout.flush();sys.stderr.flush()\n"                                                                 \
        " except BaseException:pass\n"                                                                                 \
        " if '_' in g:\n"                                                                                              \
        "  v=g['_']\n"                                                                                                 \
        "  try:d['json']=json.dumps(v,allow_nan=False)\n"                                                              \
        "  except BaseException:\n"                                                                                    \
        "   try:d['repr']=repr(v)\n"                                                                                   \
        "   except BaseException:d['repr']='<repr failed>'\n"                                                          \
        "  if len(d.get('json',d.get('repr','')))>cap:d.pop('json',0);d.pop('repr',0);d['big']=True\n"                 \
        " os.write(fr,json.dumps(d).encode())\n"                                                                       \
        " os._exit(0)\n"                                                                                               \
        "def rd(fd,cap):\n"                                                                                            \
        " n=os.lseek(fd,0,os.SEEK_END);return os.pread(fd,min(n,cap),0),n>cap\n"                                       \
        "def report(fo,fe,fr,cap,late,st):\n"                                                                          \
        " o,ot=rd(fo,cap);e,et=rd(fe,cap);r,_x=rd(fr,cap*8)\n"                                                         \
        " doc={'output':o.decode('utf-8','replace'),'error':e.decode('utf-8','replace'),'truncated':ot or et}\n"       \
        " d=json.loads(r) if r else None\n"                                                                            \
        " if late:doc['timed_out']=True\n"                                                                             \
        " elif d is None:doc['error']+=('\\n' if doc['error'] and not doc['error'].endswith('\\n') else '')+('[the "   \
        "code ended the interpreter with exit status %d before finishing]'%os.WEXITSTATUS(st) if os.WIFEXITED(st) "    \
        "else '[the code was killed by signal %d (memory limit?)]'%os.WTERMSIG(st))\n"                                 \
        " doc['success']=bool(d and d['ok'] and not late)\n"                                                           \
        " if d and 'json' in d:doc['result']=json.loads(d['json'])\n"                                                  \
        " elif d and 'repr' in d:doc['result']=d['repr']\n"                                                            \
        " elif d and d.get('big'):doc['error']+='[result: the value of _ is over %d bytes; not returned]\\n'%cap\n"    \
        " return json.dumps(doc)\n"

const char cm_python_wrapper[] =
        SHARED "lim,cap,tmo=int(sys.argv[1]),int(sys.argv[2]),int(sys.argv[3])\n"
               "code=sys.stdin.buffer.read().decode('utf-8','surrogateescape')\n"
               "fo,fe,fr=os.memfd_create('output',0),os.memfd_create('error',0),os.memfd_create('result')\n"
               "pid=os.fork()\n"
               "if pid==0:stdio(fo,fe);run(code,lim,cap,fr)\n"
               "late=[]\n"
               "def alarm(*a):\n"
               " late.append(1)\n"
               " try:os.kill(pid,9)\n"
               " except OSError:pass\n"
               "signal.signal(signal.SIGALRM,alarm);signal.alarm(tmo)\n"
               "while True:\n"
               " try:st=os.waitpid(pid,0)[1];break\n"
               " except InterruptedError:pass\n"
               "signal.alarm(0)\n"
               "sys.stdout.write(report(fo,fe,fr,cap,bool(late),st));sys.stdout.flush()\n"
               "if late:signal.pause()\n";

const char cm_python_zygote[] = SHARED
        "import ctypes,resource,select,socket,struct,time\n"
        "libc=ctypes.CDLL(None,use_errno=True)\n"
        "me=os.getpid()\n"
        "ctl=socket.socket(fileno=os.dup(0))\n"
        "nul=os.open('/dev/null',os.O_RDWR);os.dup2(nul,0);os.close(nul)\n"
        "wr,ww=os.pipe2(os.O_NONBLOCK|os.O_CLOEXEC)\n"
        "signal.set_wakeup_fd(ww);signal.signal(signal.SIGCHLD,lambda*a:None)\n"
        "poller=select.poll();poller.register(ctl,select.POLLIN);poller.register(wr,select.POLLIN)\n"
        "calls={};socks={}\n"
        "def kids(p):\n"
        " r=[]\n"
        " try:ts=os.listdir('/proc/%d/task'%p)\n"
        " except OSError:return r\n"
        " for t in ts:\n"
        "  try:\n"
        "   with open('/proc/%d/task/%s/children'%(p,t)) as f:r+=[int(x) for x in f.read().split()]\n"
        "  except OSError:pass\n"
        " return r\n"
        "def gone(p):\n"
        " try:\n"
        "  with open('/proc/%d/stat'%p) as f:return f.read().rsplit(')',1)[1].split()[0] in 'ZX'\n"
        " except (OSError,IndexError):return True\n"
        "def kill(p):\n"
        " try:os.kill(p,signal.SIGSTOP)\n"
        " except OSError:return\n"
        " for _ in range(2000):\n"
        "  live=False;todo=kids(p)\n"
        "  while todo:\n"
        "   c=todo.pop()\n"
        "   if not gone(c):\n"
        "    live=True\n"
        "    try:os.kill(c,signal.SIGKILL)\n"
        "    except OSError:pass\n"
        "   todo+=kids(c)\n"
        "  if not live:break\n"
        " try:os.kill(p,signal.SIGKILL)\n"
        " except OSError:pass\n"
        "def stop(c):\n"
        " if c['cs'] in socks:poller.unregister(c['cs']);del socks[c['cs']]\n"
        " if not c['killed']:c['killed']=True;kill(c['pid'])\n"
        "def tell(cs,b):\n"
        " try:os.write(cs,b)\n"
        " except OSError:pass\n"
        " os.close(cs)\n"
        "spare=[]\n"
        "def warm():\n"
        " try:\n"
        "  exec(compile('_=[1,{}]\\nx=str(_)\\n','<warm>','exec'),{'__builtins__':__builtins__})\n"
        "  json.loads(json.dumps({'ok':True,'json':json.dumps([1])}));print(end='')\n"
        " except BaseException:pass\n"
        "def child(sk,f):\n"
        " try:\n"
        "  keep=sorted(set(f)|{sk.fileno()});lo=3\n"
        "  for k in keep:os.closerange(lo,k);lo=k+1\n"
        "  os.closerange(lo,1<<20)\n"
        "  os.setsid();libc.prctl(36,1,0,0,0);libc.prctl(1,9,0,0,0)\n"
        "  if os.getppid()!=me:os._exit(137)\n"
        "  signal.set_wakeup_fd(-1);signal.signal(signal.SIGCHLD,signal.SIG_DFL)\n"
        "  stdio(f[0],f[1]);warm()\n"
        "  m,fds,_f,_a=socket.recv_fds(sk,65536,1)\n"
        "  if not m or len(fds)!=1:os._exit(0)\n"
        "  sk.close();a=m.split(b'\\0');lim,cap=int(a[1]),int(a[2])\n"
        "  os.chdir(a[0])\n"
        "  b=[]\n"
        "  while True:\n"
        "   x=os.read(fds[0],1<<20)\n"
        "   if not x:break\n"
        "   b.append(x)\n"
        "  os.close(fds[0])\n"
        " except BaseException:os._exit(127)\n"
        " run(b''.join(b).decode('utf-8','surrogateescape'),lim,cap,f[2])\n"
        "def prefork():\n"
        " f=(os.memfd_create('output',0),os.memfd_create('error',0),os.memfd_create('result'))\n"
        " a,b=socket.socketpair(socket.AF_UNIX,socket.SOCK_SEQPACKET)\n"
        " try:pid=os.fork()\n"
        " except BaseException:\n"
        "  for x in f:os.close(x)\n"
        "  a.close();b.close();return\n"
        " if pid==0:ctl.detach();a.detach();child(b,f)\n"
        " b.close();spare.append((pid,a,f))\n"
        "def zwarm():\n"
        " try:t=os.memfd_create('warm');report(t,t,t,1024,False,0);struct.pack('i',0);os.close(t)\n"
        " except BaseException:pass\n"
        "def take():\n"
        " m,fds,_f,_a=socket.recv_fds(ctl,65536,4)\n"
        " if not m:os._exit(0)\n"
        " if len(fds)!=4:\n"
        "  for x in fds:os.close(x)\n"
        "  return\n"
        " cin,out,err,cs=fds;os.close(err);pid=0\n"
        " try:\n"
        "  a=m.split(b'\\0');lim,cap,tmo=int(a[1]),int(a[2]),int(a[3])\n"
        "  os.chdir(a[0]);os.chdir('/')\n"
        "  for _t in (0,1):\n"
        "   if not spare:prefork()\n"
        "   p,sk,f=spare.pop()\n"
        "   try:socket.send_fds(sk,[b'\\0'.join(a[:3])],[cin]);pid=p\n"
        "   except OSError:\n"
        "    for x in f:os.close(x)\n"
        "   sk.close()\n"
        "   if pid:break\n"
        " except BaseException:pass\n"
        " os.close(cin)\n"
        " if not pid:\n"
        "  os.close(out);tell(cs,b'f');return\n"
        " c={'pid':pid,'cs':cs,'out':out,'f':f,'cap':cap,'dl':time.monotonic()+tmo,'late':False,'killed':False}\n"
        " calls[pid]=c;socks[cs]=c;poller.register(cs,select.POLLIN)\n"
        "def finish(c,st):\n"
        " if c['cs'] in socks:poller.unregister(c['cs']);del socks[c['cs']]\n"
        " try:\n"
        "  v=memoryview(report(*c['f'],c['cap'],c['late'],st).encode())\n"
        "  while v:v=v[os.write(c['out'],v):]\n"
        " except OSError:pass\n"
        " for x in c['f']+(c['out'],):os.close(x)\n"
        " tell(c['cs'],struct.pack('i',os.WEXITSTATUS(st) if os.WIFEXITED(st) else 128+os.WTERMSIG(st)))\n"
        "def reap():\n"
        " done=[]\n"
        " while True:\n"
        "  try:p,st=os.waitpid(-1,os.WNOHANG)\n"
        "  except ChildProcessError:break\n"
        "  if p==0:break\n"
        "  if p in calls:done.append((calls.pop(p),st))\n"
        " for c,st in done:finish(c,st)\n"
        " if done and not spare:prefork();zwarm()\n"
        "for _w in range(3):warm()\n"
        "import gc;gc.freeze()\n"
        "prefork();zwarm()\n"
        "ctl.send(b'z')\n"
        "while True:\n"
        " dl=[c['dl'] for c in calls.values() if not c['late']]\n"
        " t=None if not dl else max(0,int((min(dl)-time.monotonic())*1000)+1)\n"
        " for fd,ev in poller.poll(t):\n"
        "  if fd==ctl.fileno():\n"
        "   if ev&select.POLLIN:take()\n"
        "   else:os._exit(0)\n"
        "  elif fd==wr:\n"
        "   try:os.read(wr,512)\n"
        "   except OSError:pass\n"
        "   reap()\n"
        "  elif fd in socks:stop(socks[fd])\n"
        " now=time.monotonic()\n"
        " for c in list(calls.values()):\n"
        "  if not c['late'] and now>=c['dl']:c['late']=True;stop(c)\n";

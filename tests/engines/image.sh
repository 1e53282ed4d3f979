#!/usr/bin/env bash
# The engines' test image from local files: busybox-static with a link per
# applet, /tmp, /workspace, an /etc/passwd with root and nobody.
#   tests/engines/image.sh ROOTFS_DIR OUT.tar
set -euo pipefail
root="$1" out="$2"
bb=/bin/busybox
[[ -x "$bb" ]] || { echo "image: $bb missing (apt-get install busybox-static)" >&2; exit 1; }
file -L "$bb" 2>/dev/null | grep -q 'statically linked' ||
        { echo "image: $bb is not static (apt-get install busybox-static)" >&2; exit 1; }
rm -rf "$root"
mkdir -p "$root"/{bin,etc,tmp,workspace,proc,sys,dev,root}
chmod 1777 "$root/tmp"
cp "$bb" "$root/bin/busybox"
for a in $("$bb" --list); do
        [[ -e "$root/bin/$a" ]] || ln -s busybox "$root/bin/$a"
done
ln -s bin "$root/sbin"
mkdir -p "$root/usr"
ln -s ../bin "$root/usr/bin"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
tar -C "$root" --numeric-owner --owner=0 --group=0 -cf "$out.tmp" .
mv "$out.tmp" "$out"

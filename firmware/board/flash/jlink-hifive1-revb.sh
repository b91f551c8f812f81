#!/bin/sh
# Flashes a board ELF into a SiFive HiFive1 Rev B through its on-board J-Link (SEGGER's
# JLinkExe), then resets it so the image runs and prints its report on the USB serial
# port (115 200 baud). Usable as a cargo runner:
#
#   CARGO_TARGET_RISCV32IMAC_UNKNOWN_NONE_ELF_RUNNER=firmware/board/flash/jlink-hifive1-revb.sh \
#     cargo run -p nmcp-board --target riscv32imac-unknown-none-elf --release --features hifive1-revb
#
# Needs a board attached (docs/decisions/board.md, "HiFive1 Rev B").
set -eu
elf=${1:?usage: jlink-hifive1-revb.sh ELF}
objcopy=
for c in rust-objcopy llvm-objcopy riscv64-unknown-elf-objcopy; do
  if command -v "$c" >/dev/null 2>&1; then objcopy=$c; break; fi
done
[ -n "$objcopy" ] || { echo "error: no objcopy (rust-objcopy, llvm-objcopy or riscv64-unknown-elf-objcopy)" >&2; exit 2; }
command -v JLinkExe >/dev/null 2>&1 || { echo "error: JLinkExe not found (SEGGER J-Link Software Pack)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$objcopy" -O ihex "$elf" "$dir/image.hex"
cat > "$dir/flash.jlink" <<EOS
r
h
loadfile $dir/image.hex
r
g
q
EOS
JLinkExe -device FE310 -if JTAG -speed 4000 -jtagconf -1,-1 -autoconnect 1 -NoGui 1 -CommandFile "$dir/flash.jlink"
echo "flashed; the report is on the board's serial port (e.g. screen /dev/ttyACM0 115200)"

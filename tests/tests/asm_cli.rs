//! `nmcp asm` / `nmcp disasm` end to end: text -> binary -> text -> binary is stable, and
//! bad input fails with `file:line:col: message` and a non-zero exit.

mod common;

use std::path::PathBuf;

/// The CLI under test, as Cargo built it for this package.
const NMCP: &str = env!("CARGO_BIN_EXE_nmcp-cli");

const SOURCE: &str = "\
; LAMB stage 2 on one tensor, plus a few loose instructions
fma.f32 ts0, mem, s1, ts0
.macro channels=0+16 mode=all col_start=0 col_count=4096 chunk=8
.phase row=0        ; u
  scale.f32 ts0, mem, s2
.phase row=1024     ; w
  sub.f32 ts0, mem, ts0
  mov.f32 mem, ts0
.end
cvt.f32.f16 ts1, mem, hi
add.f16 ts1, mem, #-3
shl.i32 ts2, mem, 3
sqacc.f32 mem
.macro channels=2+1 mode=single bank_group=1 bank=3 col_start=64 col_count=100 chunk=4
.phase row=7
  add.f32 ts0, ts0, #1
  jump -1, 4
  exit
.end
";

/// A fresh directory under the system temp dir, unique to this test and process.
fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nmcp-asm-cli-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run_ok(args: &[&str]) -> String {
    let out = common::nmcp(NMCP, args);
    assert!(
        out.status.success(),
        "nmcp {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn assemble_disassemble_reassemble_is_stable() {
    let dir = temp_dir("roundtrip");
    let src = dir.join("prog.s");
    std::fs::write(&src, SOURCE).unwrap();
    let bin = dir.join("prog.nmcb");
    run_ok(&["asm", src.to_str().unwrap(), "-o", bin.to_str().unwrap()]);
    let bytes = std::fs::read(&bin).unwrap();
    assert_eq!(&bytes[..4], b"NMCB");

    let text = run_ok(&["disasm", bin.to_str().unwrap()]);
    assert!(text.contains("fma.f32 ts0, mem, s1, ts0"), "{text}");
    assert!(text.contains("mode=single bank_group=1 bank=3"), "{text}");
    assert!(text.contains("jump -1, 4"), "{text}");

    let src2 = dir.join("again.s");
    std::fs::write(&src2, &text).unwrap();
    // Default output name: the source with extension .nmcb.
    run_ok(&["asm", src2.to_str().unwrap()]);
    assert_eq!(std::fs::read(dir.join("again.nmcb")).unwrap(), bytes);
    // The canonical text is a fixed point.
    assert_eq!(
        run_ok(&["disasm", dir.join("again.nmcb").to_str().unwrap()]),
        text
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hex_output_and_word_disassembly_agree() {
    let dir = temp_dir("hex");
    let src = dir.join("prog.s");
    std::fs::write(&src, SOURCE).unwrap();
    let hex = run_ok(&["asm", "--hex", src.to_str().unwrap()]);
    let first = hex.lines().next().unwrap();
    let (word, comment) = first.split_once("  ; ").unwrap();
    assert_eq!(comment, "fma.f32 ts0, mem, s1, ts0");
    let text = run_ok(&["disasm", "--word", &format!("0x{word}")]);
    assert_eq!(text.trim_end(), comment);
    assert_eq!(
        hex.lines()
            .filter(|l| l.starts_with("macro 4e4d434d"))
            .count(),
        2
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_source_reports_file_line_column() {
    let dir = temp_dir("bad");
    let src = dir.join("bad.s");
    std::fs::write(&src, "nop\n  mov.f32 s1, mem\n").unwrap();
    let out = common::nmcp(NMCP, &["asm", src.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!("{}:2:11: expected tsN or mem", src.display());
    assert!(err.contains(&want), "stderr {err:?} lacks {want:?}");
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_binary_reports_offset() {
    let dir = temp_dir("badbin");
    let src = dir.join("p.s");
    std::fs::write(&src, "nop\nexit\n").unwrap();
    let bin = dir.join("p.nmcb");
    run_ok(&["asm", src.to_str().unwrap(), "-o", bin.to_str().unwrap()]);
    let mut bytes = std::fs::read(&bin).unwrap();
    // Second word (offset 8 + 8 + 4), top byte: opcode 0x05 is reserved.
    bytes[23] = 0x14;
    std::fs::write(&bin, &bytes).unwrap();
    let out = common::nmcp(NMCP, &["disasm", bin.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("offset 20:") && err.contains("reserved opcode 0x05"),
        "{err}"
    );

    let out = common::nmcp(NMCP, &["disasm", "--word", "0x14000000"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("opcode"));
    let _ = std::fs::remove_dir_all(&dir);
}

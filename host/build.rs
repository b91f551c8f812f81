//! Records `git describe` at build time (`NMCP_GIT_DESCRIBE`), so that a sweep's point
//! hash changes with the code that computed it. Without git (a source tarball), the
//! variable is absent and the hash uses the crate version alone.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let o = Command::new("git").args(args).output().ok()?;
    if !o.status.success() {
        return None;
    }
    let s = String::from_utf8(o.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn watch(path: &str) {
    if Path::new(path).exists() {
        println!("cargo:rerun-if-changed={path}");
    }
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=NMCP_GIT_DESCRIBE");
    if let Ok(v) = std::env::var("NMCP_GIT_DESCRIBE") {
        println!("cargo:rustc-env=NMCP_GIT_DESCRIBE={v}");
        return;
    }
    let Some(describe) = git(&["describe", "--always", "--tags"]) else {
        return;
    };
    println!("cargo:rustc-env=NMCP_GIT_DESCRIBE={describe}");
    // Rebuild when HEAD moves: HEAD itself (a checkout), the branch it points to (a
    // commit) and packed refs.
    if let Some(p) = git(&["rev-parse", "--git-path", "HEAD"]) {
        watch(&p);
    }
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(p) = git(&["rev-parse", "--git-path", &r]) {
            watch(&p);
        }
    }
    if let Some(p) = git(&["rev-parse", "--git-path", "packed-refs"]) {
        watch(&p);
    }
}

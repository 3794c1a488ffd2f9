//! Records the commit the binary is built from (`DLIO_COMMIT`), for `dlio --version` and
//! `summary.json`, so that a run says exactly what code produced it. Written by hand: it is
//! one `git` call, and the crates that do this (vergen, built) bring a dependency tree for it.
//! A build outside a git checkout (a source tarball) says "unknown"; `DLIO_COMMIT` set in the
//! build's environment wins (packagers).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-env-changed=DLIO_COMMIT");
    let commit = std::env::var("DLIO_COMMIT").ok().or_else(|| {
        // Rebuild when HEAD moves or the index changes (a commit, a checkout, a staged edit).
        for path in ["HEAD", "index"] {
            if let Some(file) = git(&["rev-parse", "--git-path", path]) {
                println!("cargo:rerun-if-changed={file}");
            }
        }
        if let Some(refs) = git(&["rev-parse", "--symbolic-full-name", "HEAD"])
            .and_then(|r| git(&["rev-parse", "--git-path", &r]))
        {
            println!("cargo:rerun-if-changed={refs}");
        }
        let head = git(&["rev-parse", "HEAD"])?;
        // Tracked files that differ from HEAD make the build "dirty": its code is not the commit's.
        let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some();
        Some(if dirty { format!("{head}-dirty") } else { head })
    });
    println!(
        "cargo:rustc-env=DLIO_COMMIT={}",
        commit.unwrap_or_else(|| "unknown".into())
    );
    // Where the source came from, for `dlio python-dist-info`'s direct_url.json: the
    // checkout's `origin`, without any credentials in it; empty when there is none.
    println!("cargo:rerun-if-env-changed=DLIO_SOURCE_URL");
    let source = std::env::var("DLIO_SOURCE_URL")
        .ok()
        .or_else(|| git(&["config", "--get", "remote.origin.url"]))
        .map(|url| match url.split_once("://") {
            Some((scheme, rest)) => {
                let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
                match authority.rfind('@') {
                    Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
                    None => url.clone(),
                }
            }
            None => url,
        })
        .unwrap_or_default();
    println!("cargo:rustc-env=DLIO_SOURCE_URL={source}");
}

//! `dlio python-dist-info`: Python package metadata for this binary, so that a wrapper that
//! records DLIO's version from Python's package metadata records this program's.
//!
//! mlpstorage (3.0.x, `provenance.json`) asks `importlib.metadata` for the distribution
//! `dlio_benchmark`: its `Version`, and in its `direct_url.json` (PEP 610) the `url` and
//! `vcs_info.commit_id`. It runs no `dlio_benchmark --version`. A non-Python `dlio_benchmark`
//! is therefore recorded as "unknown", or as the Python DLIO that happens to be installed
//! beside it. This writes a metadata-only distribution (no module, no script: the
//! `dlio_benchmark` on the PATH stays this binary) into a `site-packages` folder, with a
//! `RECORD`, so that `pip uninstall dlio_benchmark` removes it again.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The distribution's name, as mlpstorage asks for it.
const DIST_NAME: &str = "dlio_benchmark";

/// What `dlio python-dist-info` writes, and where.
#[derive(Debug)]
pub struct DistInfoRequest {
    /// The `site-packages` (purelib) folder of the Python that runs the wrapper.
    pub site_packages: PathBuf,
}

/// Writes `dlio_benchmark-{VERSION}.dist-info` into the request's folder and returns its path.
/// Refuses to write beside another installed `dlio_benchmark` (the Python DLIO), whose
/// metadata would answer first or in its place.
pub fn write_dist_info(request: &DistInfoRequest) -> Result<PathBuf> {
    let site = &request.site_packages;
    if !site.is_dir() {
        bail!(
            "{} is not a folder; pass the site-packages folder of the Python that runs \
             mlpstorage: --site-packages \"$(python3 -c 'import sysconfig; \
             print(sysconfig.get_paths()[\"purelib\"])')\"",
            site.display()
        );
    }
    let dir_name = format!("{DIST_NAME}-{}.dist-info", crate::VERSION);
    // One listing: another dlio_benchmark's metadata refuses the whole command before ours
    // from an earlier run (of any version) is replaced.
    let mut ours = Vec::new();
    for entry in std::fs::read_dir(site).with_context(|| format!("listing {}", site.display()))? {
        let name = entry
            .with_context(|| format!("listing {}", site.display()))?
            .file_name();
        let name = name.to_string_lossy();
        let dist = name.ends_with(".dist-info")
            && normalized(name.split('-').next().unwrap_or_default()) == normalized(DIST_NAME);
        if !dist {
            continue;
        }
        let path = site.join(&*name);
        if written_by_us(&path) {
            ours.push(path);
        } else if name != dir_name {
            bail!(
                "{} already holds {name}, another dlio_benchmark (the Python DLIO, which \
                 mlpstorage installs as a dependency): Python would report its version for this \
                 binary's runs. Remove it first (`pip uninstall -y dlio-benchmark` with that \
                 Python), then run this again",
                site.display()
            );
        }
    }
    for path in ours {
        std::fs::remove_dir_all(&path)
            .with_context(|| format!("removing the earlier {}", path.display()))?;
    }
    let files = dist_files(&dir_name);
    let staging = site.join(format!(".{dir_name}.partial"));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir(&staging).with_context(|| format!("creating {}", staging.display()))?;
    for (name, text) in &files {
        let path = staging.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    // Whole or not at all: the folder appears under its name only when every file is in it.
    let target = site.join(&dir_name);
    std::fs::rename(&staging, &target)
        .with_context(|| format!("moving {} to {}", staging.display(), target.display()))?;
    Ok(target)
}

/// PEP 503 normalisation, with which Python's metadata finder matches names.
fn normalized(name: &str) -> String {
    name.to_ascii_lowercase().replace(['-', '.'], "_")
}

/// True when the dist-info folder at `path` was written by this command.
fn written_by_us(path: &Path) -> bool {
    std::fs::read_to_string(path.join("INSTALLER")).is_ok_and(|s| s.trim() == INSTALLER)
}

/// The `INSTALLER` this command writes (PEP 376), by which it knows its own folders.
const INSTALLER: &str = "dlio python-dist-info";

/// The files of the dist-info folder `dir_name`, by name, RECORD last.
fn dist_files(dir_name: &str) -> Vec<(&'static str, String)> {
    let metadata = format!(
        "Metadata-Version: 2.1\nName: {DIST_NAME}\nVersion: {}\nSummary: dlio (Rust) installed \
         as dlio_benchmark; built from commit {}\n",
        crate::VERSION,
        crate::COMMIT
    );
    let direct_url = serde_json::json!({
        "url": source_url(),
        "vcs_info": { "vcs": "git", "commit_id": crate::COMMIT },
    })
    .to_string();
    let mut files = vec![
        ("METADATA", metadata),
        ("INSTALLER", format!("{INSTALLER}\n")),
        ("direct_url.json", direct_url),
    ];
    let mut record = String::new();
    for (name, _) in &files {
        // Hashes are optional in RECORD; pip removes the listed files without them.
        let _ = writeln!(record, "{dir_name}/{name},,");
    }
    let _ = writeln!(record, "{dir_name}/RECORD,,");
    files.push(("RECORD", record));
    files
}

/// Where the binary's source is: the repository it was built from, as the build found its
/// remote (`DLIO_SOURCE_URL`), else the folder it was built in.
fn source_url() -> String {
    match option_env!("DLIO_SOURCE_URL") {
        Some(url) if !url.is_empty() => url.to_string(),
        _ => format!(
            "file://{}",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .ancestors()
                .nth(2)
                .unwrap_or(Path::new("/"))
                .display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dist_info_names_this_build_and_lists_its_files() {
        let files = dist_files("dlio_benchmark-1.0.dist-info");
        let text = |name: &str| {
            files
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, t)| t.clone())
                .unwrap()
        };
        assert!(text("METADATA").contains("\nName: dlio_benchmark\n"));
        assert!(
            text("METADATA").contains(&format!("\nVersion: {}\n", crate::VERSION)),
            "{}",
            text("METADATA")
        );
        let url: serde_json::Value = serde_json::from_str(&text("direct_url.json")).unwrap();
        assert_eq!(url["vcs_info"]["commit_id"], crate::COMMIT);
        assert!(url["url"].as_str().is_some_and(|u| !u.is_empty()));
        let record = text("RECORD");
        for name in ["METADATA", "INSTALLER", "direct_url.json", "RECORD"] {
            assert!(record.contains(&format!("dlio_benchmark-1.0.dist-info/{name},,")));
        }
    }
}

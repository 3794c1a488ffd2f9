//! The workload's storage keys as the I/O engine's settings: which engine, O_DIRECT, request
//! sizes, and for S3 the bucket, credentials and the endpoint of each MPI process.

use dlio_config::{Config, StorageType};
use dlio_storage::{EngineKind, EngineSettings, S3Settings};

/// The S3 endpoint of MPI process `process`: from `endpoint_uris` (the fork's
/// `S3_ENDPOINT_URIS`: two or more comma-separated URLs; process `p` uses entry `p mod N`, as
/// the fork picks by MPI rank), else `configured`. Also returns what to log about the choice.
fn endpoint_of_process(
    configured: Option<String>,
    endpoint_uris: &str,
    process: usize,
    secure: bool,
) -> (Option<String>, Option<String>) {
    let listed: Vec<String> = endpoint_uris
        .split(',')
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty())
        .collect();
    let (endpoint, note) = match listed.len() {
        0 => (configured, None),
        1 => (
            configured,
            Some(
                "S3_ENDPOINT_URIS holds one endpoint; like the fork, dlio needs two or more \
                 to spread processes and ignores it (set storage_options.endpoint_url for one \
                 endpoint)"
                    .to_string(),
            ),
        ),
        n => {
            let chosen = listed[process % n].clone();
            let note = format!(
                "Multi-endpoint (S3_ENDPOINT_URIS): process {process} uses {chosen} (endpoint \
                 {} of {n}); every rank of a process shares its endpoint",
                process % n + 1
            );
            (Some(chosen), Some(note))
        }
    };
    // The fork's minio client reads a scheme-less endpoint as https unless `secure: false`.
    let endpoint = endpoint.map(|e| {
        if e.contains("://") {
            e
        } else if secure {
            format!("https://{e}")
        } else {
            format!("http://{e}")
        }
    });
    (endpoint, note)
}

/// The S3 settings of MPI process `process`: the bucket and `storage_options`, with what the
/// workload leaves unset taken from the `AWS_*` environment, and what to log about the
/// endpoint.
fn s3_settings(config: &Config, process: usize) -> (S3Settings, Option<String>) {
    let options = config.storage.storage_options.clone().unwrap_or_default();
    // What the workload leaves unset comes from the AWS_* environment, as the fork's
    // clients read it.
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let (endpoint, note) = endpoint_of_process(
        options
            .endpoint_url
            .clone()
            .filter(|e| !e.trim().is_empty())
            .or_else(|| env("AWS_ENDPOINT_URL"))
            .or_else(|| env("AWS_ENDPOINT_URL_S3")),
        &std::env::var("S3_ENDPOINT_URIS").unwrap_or_default(),
        process,
        options.secure,
    );
    let region_given = config
        .storage
        .storage_options
        .as_ref()
        .is_some_and(|o| o.region != dlio_config::StorageOptions::default().region);
    let settings = S3Settings {
        bucket: config
            .storage
            .storage_root
            .trim_start_matches("s3://")
            .trim_matches('/')
            .to_string(),
        endpoint_url: endpoint,
        region: Some(if region_given {
            options.region.clone()
        } else {
            env("AWS_REGION")
                .or_else(|| env("AWS_DEFAULT_REGION"))
                .unwrap_or_else(|| options.region.clone())
        }),
        access_key_id: options
            .access_key_id
            .clone()
            .or_else(|| env("AWS_ACCESS_KEY_ID")),
        secret_access_key: options
            .secret_access_key
            .clone()
            .or_else(|| env("AWS_SECRET_ACCESS_KEY")),
        force_path_style: options.s3_force_path_style,
        max_attempts: options.s3_max_attempts,
        ca_bundle: env("AWS_CA_BUNDLE").map(std::path::PathBuf::from),
        ..S3Settings::default()
    };
    let (settings, profile_note) = with_profile(settings, options.s3_profile.as_deref());
    let note = match (note, profile_note) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    };
    (settings, note)
}

/// The credentials (and region, where the workload and the environment give none) of AWS
/// profile `profile` (`storage_options.s3_profile`, the fork's s3torchconnector key), from the
/// shared credentials and config files, for keys the workload and the environment leave unset;
/// and what to log about it.
fn with_profile(mut settings: S3Settings, profile: Option<&str>) -> (S3Settings, Option<String>) {
    let Some(profile) = profile.filter(|p| !p.is_empty()) else {
        return (settings, None);
    };
    let home = std::env::var("HOME").unwrap_or_default();
    let file = |var: &str, default: &str| {
        std::env::var(var)
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| format!("{home}/.aws/{default}"))
    };
    let credentials_file = file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    let config_file = file("AWS_CONFIG_FILE", "config");
    let credentials = ini_section(&credentials_file, profile);
    // The config file names a profile's section `profile NAME` (the default one `default`).
    let config = ini_section(&config_file, &format!("profile {profile}"))
        .or_else(|| ini_section(&config_file, profile));
    let Some(credentials) = credentials else {
        return (
            settings,
            Some(format!(
                "storage_options.s3_profile `{profile}` is not in {credentials_file}: the \
                 credentials come from the workload and the environment"
            )),
        );
    };
    let get = |section: &[(String, String)], key: &str| {
        section
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    if settings.access_key_id.is_none() {
        settings.access_key_id = get(&credentials, "aws_access_key_id");
        settings.secret_access_key = get(&credentials, "aws_secret_access_key");
    }
    if let Some(region) = config.as_deref().and_then(|c| get(c, "region")) {
        let env_region = std::env::var("AWS_REGION").is_ok();
        if !env_region && settings.region.as_deref() == Some("us-east-1") {
            settings.region = Some(region);
        }
    }
    (
        settings,
        Some(format!(
            "credentials of AWS profile `{profile}` ({credentials_file})"
        )),
    )
}

/// The `key = value` lines of section `[name]` of the INI file at `path` (keys lowercase),
/// if the file and the section are there. Written by hand: the AWS shared files are the
/// simplest INI (no continuation the credentials use), and a crate for it would be all this.
fn ini_section(path: &str, name: &str) -> Option<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut lines = text.lines().map(str::trim);
    lines.find(|l| {
        l.strip_prefix('[')
            .and_then(|l| l.strip_suffix(']'))
            .map(str::trim)
            == Some(name)
    })?;
    Some(
        lines
            .take_while(|l| !l.starts_with('['))
            .filter(|l| !l.starts_with('#') && !l.starts_with(';'))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect(),
    )
}

/// The engine settings of a run: `storage.io_engine`, `reader.odirect`,
/// `reader.transfer_size`, `storage.io_depth`, and for S3 the bucket and its options (the
/// endpoint is the one of MPI process `process`), with what to log about the endpoint.
pub(crate) fn engine_settings(config: &Config, process: usize) -> (EngineSettings, Option<String>) {
    let s3 = config.storage.storage_type == StorageType::S3;
    let engine = if s3 {
        EngineKind::S3
    } else if config.storage.storage_type == StorageType::DirectFs {
        EngineKind::Direct
    } else {
        // Config keeps the names; the engine table knows the engines.
        EngineKind::from_name(config.storage.io_engine.as_str()).unwrap_or_else(|| {
            panic!(
                "storage.io_engine {} has no row in dlio_storage::ENGINES",
                config.storage.io_engine.as_str()
            )
        })
    };
    let (s3, endpoint_note) = if s3 {
        let (settings, note) = s3_settings(config, process);
        (Some(settings), note)
    } else {
        (None, None)
    };
    let settings = EngineSettings {
        engine,
        odirect: config.reader.odirect,
        transfer_size: config.reader.transfer_size,
        transfer_size_distribution: config
            .reader
            .transfer_size_distribution
            .iter()
            .map(|e| (e.size, e.weight))
            .collect(),
        seed: config.train.seed,
        sample_request_patterns: config
            .sample_request_patterns()
            .into_iter()
            .map(|p| dlio_storage::RequestPattern {
                requests: p
                    .requests
                    .iter()
                    .map(|r| dlio_storage::PatternRequest {
                        from_end: r.from == dlio_config::RequestAnchor::End,
                        offset: r.offset,
                        size: r.size,
                        blocks: r.blocks,
                        until_end: r.until_end,
                        work: std::time::Duration::from_secs_f64(r.work),
                        wait: std::time::Duration::from_secs_f64(r.wait),
                    })
                    .collect(),
                weight: p.weight,
                read_rest: p.read_rest,
            })
            .collect(),
        read_buffer: config
            .reader
            .read_buffer
            .map(|b| dlio_storage::BufferedStream {
                buffer: usize::try_from(b.size).unwrap_or(usize::MAX),
                header_read: b.header_read,
                app_read: usize::try_from(b.app_read_size).unwrap_or(usize::MAX),
            }),
        head_request_size: config
            .reader
            .head_request_size
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        io_depth: config.storage.io_depth,
        s3,
        read_bytes_per_second: config.storage.read_bytes_per_second,
        fresh_read_share: config.reader.fresh_read_share,
        // Validated below 4096 (`reader.buffer_page_offset`).
        buffer_page_offset: config.reader.buffer_page_offset.map(|o| o as usize),
        // Validated as seconds from 0 (`reader.request_work_time`).
        request_work: std::time::Duration::try_from_secs_f64(config.reader.request_work_time)
            .unwrap_or_default(),
    };
    (settings, endpoint_note)
}

#[cfg(test)]
mod endpoint_tests {
    use super::{endpoint_of_process, ini_section};

    #[test]
    fn processes_take_the_listed_endpoints_round_robin() {
        let list = "http://10.0.0.1:9000, http://10.0.0.2:9000,http://10.0.0.3:9000";
        let pick = |p| endpoint_of_process(Some("http://one".into()), list, p, true).0;
        assert_eq!(pick(0).as_deref(), Some("http://10.0.0.1:9000"));
        assert_eq!(pick(2).as_deref(), Some("http://10.0.0.3:9000"));
        assert_eq!(pick(4).as_deref(), Some("http://10.0.0.2:9000"));
        // One entry is not a list (the fork ignores it too); none leaves the configured one.
        let (one, note) = endpoint_of_process(Some("http://one".into()), "http://x", 1, true);
        assert_eq!(one.as_deref(), Some("http://one"));
        assert!(note.unwrap().contains("two or more"));
        assert_eq!(
            endpoint_of_process(Some("http://one".into()), "", 3, true)
                .0
                .as_deref(),
            Some("http://one")
        );
    }

    #[test]
    fn an_aws_profile_gives_its_credentials_and_region() {
        let dir = tempfile::tempdir().unwrap();
        let credentials = dir.path().join("credentials");
        std::fs::write(
            &credentials,
            "[default]\naws_access_key_id = A\naws_secret_access_key = B\n\n[lab]\n\
             aws_access_key_id = LAB\naws_secret_access_key = SECRET\n",
        )
        .unwrap();
        let config = dir.path().join("config");
        std::fs::write(&config, "[profile lab]\nregion = eu-west-3\n").unwrap();
        assert_eq!(
            ini_section(credentials.to_str().unwrap(), "lab"),
            Some(vec![
                ("aws_access_key_id".into(), "LAB".into()),
                ("aws_secret_access_key".into(), "SECRET".into())
            ])
        );
        assert_eq!(
            ini_section(config.to_str().unwrap(), "profile lab"),
            Some(vec![("region".into(), "eu-west-3".into())])
        );
        assert_eq!(ini_section(credentials.to_str().unwrap(), "missing"), None);
    }

    #[test]
    fn an_endpoint_without_a_scheme_follows_secure() {
        let with = |secure| endpoint_of_process(Some("minio:9000".into()), "", 0, secure).0;
        assert_eq!(with(true).as_deref(), Some("https://minio:9000"));
        assert_eq!(with(false).as_deref(), Some("http://minio:9000"));
    }
}

#[cfg(test)]
mod engine_name_tests {
    use dlio_storage::{ENGINES, EngineKind};

    /// Every engine of the table maps back to itself by name, and the names config refers to
    /// have rows.
    #[test]
    fn every_engine_of_the_table_is_found_by_its_name() {
        for row in ENGINES {
            assert_eq!(EngineKind::from_name(row.kind.name()), Some(row.kind));
        }
        for engine in [
            dlio_config::IoEngine::Posix,
            dlio_config::IoEngine::Direct,
            dlio_config::IoEngine::Mmap,
            dlio_config::IoEngine::IoUring,
        ] {
            assert!(
                EngineKind::from_name(engine.as_str()).is_some(),
                "{engine:?}"
            );
        }
    }
}

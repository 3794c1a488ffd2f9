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
        ..S3Settings::default()
    };
    (settings, note)
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
        sample_requests: config
            .reader
            .sample_requests
            .iter()
            .map(|r| dlio_storage::PatternRequest {
                from_end: r.from == dlio_config::RequestAnchor::End,
                offset: r.offset,
                size: r.size,
                work: std::time::Duration::from_secs_f64(r.work),
            })
            .collect(),
        io_depth: config.storage.io_depth,
        s3,
        read_bytes_per_second: config.storage.read_bytes_per_second,
        fresh_read_share: config.reader.fresh_read_share,
    };
    (settings, endpoint_note)
}

#[cfg(test)]
mod endpoint_tests {
    use super::endpoint_of_process;

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

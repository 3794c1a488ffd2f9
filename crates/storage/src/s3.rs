//! The `s3` engine: objects in one S3 bucket (any S3-compatible server), through
//! `object_store` on a small private tokio runtime, so callers stay synchronous.
//!
//! Paths map to keys as in DLIO (`data_folder: s3://bucket/prefix`, `storage_root: bucket`):
//! `s3://bucket/a/b` and `a/b` both name key `a/b` of the configured bucket. Listing a
//! "directory" is one delimited LIST of `key/`: objects become files, common prefixes
//! become directories. `create` buffers the object and `commit` publishes it with one PUT up
//! to 32 MiB, or with a multipart upload (parts of [`S3_PART_BYTES`], a few in flight) when it
//! is larger;
//! either way it becomes visible only when complete. `open` is one HEAD; reads are ranged
//! GETs (one per transfer with [`crate::SplitReads`]; a whole-object read is one GET of the
//! whole range); a batch keeps `io_depth` GETs in flight, and so does a stream
//! ([`ReadHandle::read_stream`]: each GET's bytes go to `consume` as they are, in request
//! order, without a copy into the window; the window's slots still bound the GETs in flight).
//!
//! Credentials never leave [`S3Settings`]: its `Debug` hides them and every error message
//! has them replaced by `<redacted>`.

use std::collections::VecDeque;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{
    BackoffConfig, ClientOptions, MultipartUpload, ObjectStore, ObjectStoreExt, PutPayload,
    RetryConfig,
};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use crate::engine::{EngineInfo, EngineKind, OdirectUse};
use crate::{
    Capabilities, Consume, DirEntry, Extent, PendingRead, ReadBell, ReadHandle, ReadRequest,
    Storage, StorageError, WholeRead, WriteHandle, check_extent, stream_slots,
};

/// Objects larger than this are uploaded in parts of this size (S3's minimum part is 5 MiB).
pub const S3_PART_BYTES: usize = 8 << 20;

/// Objects up to this size are one PUT: a multipart upload of a few parts costs three more
/// requests, and a server that assembles parts by copying them (s3s-fs, a file system behind
/// an S3 API) writes the object twice; s3dlio and the AWS SDKs PUT objects of this size whole.
const SINGLE_PUT_BYTES: usize = 32 << 20;

/// Parts uploaded at the same time by one writer.
const PARTS_IN_FLIGHT: usize = 4;

/// How to reach the bucket: `storage.storage_root` and `storage.storage_options` of the
/// workload. Unset keys fall back to the `AWS_*` environment variables (`AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_ENDPOINT_URL`, `AWS_REGION`, ...).
#[derive(Clone, Default)]
pub struct S3Settings {
    /// The bucket (`storage.storage_root`).
    pub bucket: String,
    /// `endpoint_url`, e.g. `http://127.0.0.1:9000`; `http://` endpoints are allowed.
    pub endpoint_url: Option<String>,
    /// `region`.
    pub region: Option<String>,
    /// `access_key_id`.
    pub access_key_id: Option<String>,
    /// `secret_access_key`.
    pub secret_access_key: Option<String>,
    /// `s3_force_path_style`: `endpoint/bucket/key` instead of `bucket.endpoint/key`.
    pub force_path_style: bool,
    /// `s3_max_attempts`: tries per request, the first included (0 counts as 1).
    pub max_attempts: u32,
    /// How long one attempt may wait for a connection (the whole retry budget is
    /// `max_attempts` times this plus the backoff). Default 5 s when zero.
    pub connect_timeout: Duration,
    /// A PEM file of certificates to trust besides the system's (`AWS_CA_BUNDLE`, as the
    /// fork's minio client reads it): a storage system's own certificate authority.
    pub ca_bundle: Option<std::path::PathBuf>,
}

/// The HTTP client's options: plain HTTP for an `http://` endpoint, the timeouts, and the
/// certificates of `settings.ca_bundle`.
fn client_options(
    settings: &S3Settings,
    endpoint: &str,
    connect_timeout: Duration,
) -> Result<ClientOptions, StorageError> {
    let mut options = ClientOptions::new()
        .with_allow_http(endpoint.starts_with("http://"))
        .with_connect_timeout(connect_timeout)
        .with_timeout(Duration::from_secs(300));
    if let Some(bundle) = &settings.ca_bundle {
        let invalid = |reason: String| StorageError::InvalidS3Settings { reason };
        let pem = std::fs::read(bundle).map_err(|e| {
            invalid(format!(
                "AWS_CA_BUNDLE names {}, which cannot be read: {e}; point it at a PEM file of \
                 certificates",
                bundle.display()
            ))
        })?;
        let certificates = object_store::Certificate::from_pem_bundle(&pem).map_err(|e| {
            invalid(format!(
                "AWS_CA_BUNDLE names {}, which holds no PEM certificate ({e}); point it at a \
                 PEM file of certificates",
                bundle.display()
            ))
        })?;
        for certificate in certificates {
            options = options.with_root_certificate(certificate);
        }
    }
    Ok(options)
}

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |set: bool| if set { "<redacted>" } else { "<unset>" };
        f.debug_struct("S3Settings")
            .field("bucket", &self.bucket)
            .field("endpoint_url", &self.endpoint_url)
            .field("region", &self.region)
            .field("access_key_id", &hidden(self.access_key_id.is_some()))
            .field(
                "secret_access_key",
                &hidden(self.secret_access_key.is_some()),
            )
            .field("force_path_style", &self.force_path_style)
            .field("max_attempts", &self.max_attempts)
            .field("ca_bundle", &self.ca_bundle)
            .finish()
    }
}

/// What every handle of one [`S3Storage`] shares.
struct Shared {
    store: Arc<AmazonS3>,
    runtime: Runtime,
    bucket: String,
    endpoint: String,
    /// Credentials to scrub from error messages.
    secrets: Vec<String>,
    io_depth: usize,
    /// Buffers of objects already sent, for the next ones.
    buffers: Arc<BufferPool>,
}

/// Write buffers kept for reuse. Each object's bytes are handed to the HTTP client to own
/// until its PUT completes; a fresh buffer per object cost generation a page fault per 4 KiB
/// written (10% of its CPU on 256 KiB objects, `perf record`), a returned one costs none.
/// Bounded: at most [`POOLED_BUFFERS`] of at most [`POOLED_BUFFER_BYTES`] each are kept.
#[derive(Debug, Default)]
struct BufferPool {
    free: std::sync::Mutex<Vec<Vec<u8>>>,
}

const POOLED_BUFFERS: usize = 32;
const POOLED_BUFFER_BYTES: usize = 4 << 20;

impl BufferPool {
    /// A buffer returned earlier if there is one (else an empty one). Its length is the bytes
    /// it held, kept as they were: a writer writes over them (rather than zeroing the room
    /// again for every object) and sends only what it wrote.
    fn take(&self) -> Vec<u8> {
        self.free
            .lock()
            .map(|mut free| free.pop())
            .unwrap_or_default()
            .unwrap_or_default()
    }

    fn give(&self, buffer: Vec<u8>) {
        if buffer.capacity() == 0 || buffer.capacity() > POOLED_BUFFER_BYTES {
            return;
        }
        if let Ok(mut free) = self.free.lock()
            && free.len() < POOLED_BUFFERS
        {
            free.push(buffer);
        }
    }

    /// `buffer` as a PUT body that goes back to the pool when the client drops it.
    fn payload(self: &Arc<Self>, buffer: Vec<u8>) -> PutPayload {
        PutPayload::from(bytes::Bytes::from_owner(Pooled {
            buffer,
            pool: Arc::clone(self),
        }))
    }
}

/// A PUT body owned by the HTTP client until it is sent, then returned to its pool.
struct Pooled {
    buffer: Vec<u8>,
    pool: Arc<BufferPool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buffer
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.buffer));
    }
}

impl Shared {
    fn error(
        &self,
        op: &'static str,
        key: &ObjectPath,
        error: object_store::Error,
    ) -> StorageError {
        self.error_at(op, format!("s3://{}/{}", self.bucket, key), error)
    }

    /// The error for a failed request about `url` (`s3://bucket/key`, or `s3://bucket` for
    /// the bucket itself), with a hint that fits the failure and credentials scrubbed.
    fn error_at(&self, op: &'static str, url: String, error: object_store::Error) -> StorageError {
        if let object_store::Error::NotFound { .. } = error {
            return StorageError::NotFound {
                path: PathBuf::from(url),
            };
        }
        let refused_status = matches!(
            error,
            object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. }
        );
        let message = scrub(error.to_string(), &self.secrets);
        // The status, from the error's kind or the status line (not any "401" in the text,
        // which a port or a request id may hold).
        let unauthenticated = matches!(error, object_store::Error::Unauthenticated { .. })
            || message.contains("401 Unauthorized");
        let code = xml_element(&message, "Code");
        if code == Some("NoSuchBucket") {
            return StorageError::BucketNotFound {
                bucket: self.bucket.clone(),
                endpoint: self.endpoint.clone(),
            };
        }
        if let Some(refusal) = Refusal::classify(code, refused_status, &message) {
            let code = match code {
                Some(code) => code.to_owned(),
                None if unauthenticated => "HTTP 401 Unauthorized".to_owned(),
                None => "HTTP 403 Forbidden".to_owned(),
            };
            return StorageError::S3AccessRefused {
                what: refusal.what(),
                op,
                url: url.into(),
                endpoint: self.endpoint.clone().into(),
                code: code.into(),
                reason: xml_element(&message, "Message").unwrap_or("").into(),
                hint: refusal.hint(),
            };
        }
        let throttled = matches!(
            code,
            Some("SlowDown" | "RequestLimitExceeded" | "Throttling")
        ) || message.contains("503 Service Unavailable");
        let hint = if throttled {
            // The client has retried with backoff up to storage_options.s3_max_attempts.
            "the store throttled every attempt (503 SlowDown): send fewer requests at once \
             (fewer ranks, reader.read_threads or storage_options.prefetch_window), allow more \
             attempts (storage_options.s3_max_attempts), or ask for more request capacity"
        } else if ["connect", "timed out", "dns", "Connection refused"]
            .iter()
            .any(|s| message.contains(s))
        {
            "the endpoint cannot be reached: check storage.storage_options.endpoint_url and that \
             the server is running"
        } else {
            "check the bucket, the endpoint and the credentials"
        };
        StorageError::ObjectStore {
            op,
            url: url.into(),
            endpoint: self.endpoint.clone().into(),
            message: message.into(),
            hint,
        }
    }
}

/// Why an S3 server refused a request that reached it, from S3's error code (and the HTTP
/// status when the response has no body, as for HEAD).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// The server does not know the access key id.
    UnknownKey,
    /// The signature does not match: wrong secret (or region).
    WrongSecret,
    /// A temporary session token is expired or invalid.
    Token,
    /// The credentials are valid but not allowed to do this.
    Denied,
    /// 401/403 without a code saying which.
    Unspecified,
}

impl Refusal {
    fn classify(code: Option<&str>, refused_status: bool, message: &str) -> Option<Refusal> {
        let refusal = match code {
            Some("InvalidAccessKeyId") => Refusal::UnknownKey,
            Some("SignatureDoesNotMatch" | "AuthorizationHeaderMalformed") => Refusal::WrongSecret,
            Some("ExpiredToken" | "InvalidToken" | "TokenRefreshRequired") => Refusal::Token,
            Some("AccessDenied" | "AllAccessDisabled" | "AccountProblem") => Refusal::Denied,
            _ if refused_status
                || message.contains("403 Forbidden")
                || message.contains("401 Unauthorized") =>
            {
                Refusal::Unspecified
            }
            _ => return None,
        };
        Some(refusal)
    }

    fn what(self) -> &'static str {
        match self {
            Refusal::Denied => "S3 access denied",
            _ => "S3 authentication failed",
        }
    }

    fn hint(self) -> &'static str {
        match self {
            Refusal::UnknownKey => {
                "the server does not know this access key id: check \
                 storage.storage_options.access_key_id (or AWS_ACCESS_KEY_ID) and that the key \
                 was made for this endpoint"
            }
            Refusal::WrongSecret => {
                "the secret does not match the access key id: check \
                 storage.storage_options.secret_access_key (or AWS_SECRET_ACCESS_KEY), and \
                 storage_options.region"
            }
            Refusal::Token => {
                "the session token is expired or invalid: refresh AWS_SESSION_TOKEN with the \
                 matching AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            }
            Refusal::Denied => {
                "the credentials are not allowed to do this: check that the access key's policy \
                 lets it list, read and write the bucket"
            }
            Refusal::Unspecified => {
                "check storage.storage_options.access_key_id and secret_access_key (or \
                 AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) and the key's permissions on the \
                 bucket"
            }
        }
    }
}

/// The text of the first `<name>...</name>` element of an S3 XML error body, if any.
fn xml_element<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let start = text.find(&open)? + open.len();
    let len = text[start..].find(&format!("</{name}>"))?;
    Some(text[start..start + len].trim()).filter(|s| !s.is_empty())
}

/// `s3`: an S3 bucket (`storage.storage_type: s3`).
pub(crate) const ENGINE: EngineInfo = EngineInfo {
    kind: EngineKind::S3,
    reads: "HEAD at open, ranged GETs (io_depth in flight for a split read)",
    writes: "one PUT, or a multipart upload of 8 MiB parts for larger objects",
    odirect: OdirectUse::Refused,
    open: |settings, _, _| {
        let s3 = settings
            .s3
            .as_ref()
            .ok_or_else(|| StorageError::InvalidEngineSettings {
                reason: "the s3 engine needs storage.storage_root (the bucket) and storage_options"
                    .into(),
            })?;
        Ok(Arc::new(S3Storage::connect(s3, settings.io_depth)?))
    },
};

/// One bucket of an S3-compatible object store.
pub struct S3Storage {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for S3Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Storage")
            .field("bucket", &self.shared.bucket)
            .field("endpoint", &self.shared.endpoint)
            .finish()
    }
}

impl S3Storage {
    /// Connects to the bucket and checks that it exists (one LIST of an empty prefix), so that
    /// a wrong endpoint, wrong credentials or a missing bucket fail here, within the retry
    /// budget, naming the endpoint or the bucket. `io_depth` GETs of one batch run at once.
    pub fn connect(settings: &S3Settings, io_depth: u32) -> Result<S3Storage, StorageError> {
        let bucket = settings.bucket.trim().trim_start_matches("s3://");
        let bucket = bucket.trim_matches('/').to_owned();
        if bucket.is_empty() || bucket.contains('/') {
            return Err(StorageError::InvalidS3Settings {
                reason: format!(
                    "storage.storage_root must be the bucket name for storage_type s3, not `{}`",
                    settings.bucket
                ),
            });
        }
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(&bucket);
        let mut endpoint = std::env::var("AWS_ENDPOINT_URL")
            .or_else(|_| std::env::var("AWS_ENDPOINT"))
            .unwrap_or_else(|_| "https://s3.amazonaws.com".to_owned());
        // Addressing: path style (`endpoint/bucket/key`) when asked, and always for an
        // endpoint that is an IP address or localhost, where a bucket cannot be a host name
        // (MinIO, moto, a storage appliance by address: what the fork's clients do there).
        // Otherwise virtual-hosted (`bucket.endpoint/key`), which for a custom endpoint means
        // putting the bucket in front of its host.
        let path_style = settings.force_path_style
            || settings
                .endpoint_url
                .as_deref()
                .is_some_and(endpoint_host_is_an_address);
        if let Some(url) = &settings.endpoint_url {
            let url = if path_style {
                url.clone()
            } else {
                virtual_hosted(url, &bucket)?
            };
            builder = builder.with_endpoint(&url);
            endpoint = url;
        }
        if let Some(region) = &settings.region {
            builder = builder.with_region(region);
        }
        let mut secrets = Vec::new();
        if let Some(id) = &settings.access_key_id {
            builder = builder.with_access_key_id(id);
        }
        if let Some(secret) = &settings.secret_access_key {
            builder = builder.with_secret_access_key(secret);
        }
        for key in [
            settings.access_key_id.clone(),
            settings.secret_access_key.clone(),
            std::env::var("AWS_ACCESS_KEY_ID").ok(),
            std::env::var("AWS_SECRET_ACCESS_KEY").ok(),
        ]
        .into_iter()
        .flatten()
        {
            if !key.is_empty() {
                secrets.push(key);
            }
        }
        let connect_timeout = if settings.connect_timeout.is_zero() {
            Duration::from_secs(5)
        } else {
            settings.connect_timeout
        };
        let attempts = settings.max_attempts.max(1);
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: (attempts - 1) as usize,
            retry_timeout: (connect_timeout + Duration::from_secs(2)) * attempts,
        };
        // PUT bodies are not hashed into the signature (`UNSIGNED-PAYLOAD`, as the AWS SDKs
        // send over TLS): hashing costs the client a SHA-256 pass over every byte written,
        // and the server another to check it. AWS_UNSIGNED_PAYLOAD=false asks for signed bodies.
        if std::env::var_os("AWS_UNSIGNED_PAYLOAD").is_none() {
            builder = builder.with_unsigned_payload(true);
        }
        builder = builder
            .with_virtual_hosted_style_request(!path_style)
            .with_retry(retry)
            .with_client_options(client_options(settings, &endpoint, connect_timeout)?);
        let store = builder
            .build()
            .map_err(|error| StorageError::InvalidS3Settings {
                reason: scrub(error.to_string(), &secrets),
            })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("dlio-s3")
            .enable_all()
            .build()
            .map_err(|source| StorageError::Io {
                op: "start the S3 client runtime for",
                path: PathBuf::from(format!("s3://{bucket}")),
                source,
            })?;
        let shared = Arc::new(Shared {
            store: Arc::new(store),
            runtime,
            bucket,
            endpoint,
            secrets,
            io_depth: io_depth.max(1) as usize,
            buffers: Arc::default(),
        });
        let probe = ObjectPath::from("dlio-bucket-check-0c1f7a");
        match shared
            .runtime
            .block_on(shared.store.list_with_delimiter(Some(&probe)))
        {
            Ok(_) => {}
            Err(object_store::Error::NotFound { .. }) => {
                return Err(StorageError::BucketNotFound {
                    bucket: shared.bucket.clone(),
                    endpoint: shared.endpoint.clone(),
                });
            }
            Err(error) => {
                return Err(shared.error_at("list", format!("s3://{}", shared.bucket), error));
            }
        }
        Ok(S3Storage { shared })
    }

    /// The bucket.
    pub fn bucket(&self) -> &str {
        &self.shared.bucket
    }

    /// The key `path` names: `s3://bucket/key` (the configured bucket only) or `key`.
    pub fn key_of(&self, path: &Path) -> Result<ObjectPath, StorageError> {
        let invalid = |reason: &'static str| StorageError::InvalidPath {
            path: path.to_path_buf(),
            reason,
        };
        let text = path
            .to_str()
            .ok_or_else(|| invalid("S3 keys must be valid UTF-8"))?;
        let key = match text.strip_prefix("s3://") {
            Some(rest) => {
                let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket != self.shared.bucket {
                    return Err(StorageError::InvalidS3Settings {
                        reason: format!(
                            "{text} is in bucket `{bucket}` but storage.storage_root is `{}`; \
                             set ++workload.storage.storage_root={bucket}",
                            self.shared.bucket
                        ),
                    });
                }
                key
            }
            None => text,
        };
        let key = key.trim_start_matches("./").trim_matches('/');
        ObjectPath::parse(key).map_err(|_| {
            invalid("not a valid S3 key (empty segments such as `a//b`, or `.`/`..` segments)")
        })
    }
}

/// Whether `endpoint`'s host is an IP address or `localhost`, where a virtual-hosted request
/// (`bucket.host`) cannot resolve.
fn endpoint_host_is_an_address(endpoint: &str) -> bool {
    match url::Url::parse(endpoint) {
        Ok(url) => match url.host() {
            Some(url::Host::Ipv4(_) | url::Host::Ipv6(_)) => true,
            Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
            None => false,
        },
        Err(_) => false,
    }
}

/// `endpoint` with `bucket.` in front of its host: the virtual-hosted form of a custom
/// endpoint (object_store takes such an endpoint as already naming the bucket).
fn virtual_hosted(endpoint: &str, bucket: &str) -> Result<String, StorageError> {
    let invalid = |reason: String| StorageError::InvalidS3Settings { reason };
    let mut url = url::Url::parse(endpoint).map_err(|e| {
        invalid(format!(
            "storage.storage_options.endpoint_url `{endpoint}` is not a URL ({e}); write it as \
             http://host:port or https://host"
        ))
    })?;
    let host = url.host_str().unwrap_or_default().to_owned();
    if host.starts_with(&format!("{bucket}.")) {
        return Ok(endpoint.to_owned());
    }
    url.set_host(Some(&format!("{bucket}.{host}")))
        .map_err(|e| {
            invalid(format!(
                "bucket `{bucket}` cannot be put in front of endpoint host `{host}` for \
             virtual-hosted requests ({e}); set storage.storage_options.s3_force_path_style: \
             true"
            ))
        })?;
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

/// A whole-object GET running on the client's runtime ([`Storage::start_whole_read`]).
struct S3PendingRead {
    path: PathBuf,
    /// The key, or why the path names none.
    key: Result<ObjectPath, StorageError>,
    task: Option<JoinHandle<object_store::Result<WholeRead>>>,
    shared: Arc<Shared>,
    /// Set by the task's [`Ringer`] as it ends (already set when there is no task).
    finished: Arc<AtomicBool>,
}

/// Owned by a background GET's task: when the task ends (its last byte, an error, a panic or
/// an abort all drop it), marks the read finished and then rings the bell, in that order, so
/// that a thread woken by the bell sees the read as finished.
struct Ringer {
    finished: Arc<AtomicBool>,
    bell: Arc<ReadBell>,
}

impl Drop for Ringer {
    fn drop(&mut self) {
        self.finished.store(true, Ordering::Release);
        self.bell.ring();
    }
}

impl PendingRead for S3PendingRead {
    fn path(&self) -> &Path {
        &self.path
    }

    fn finished(&self) -> Option<bool> {
        Some(self.finished.load(Ordering::Acquire))
    }

    fn wait(mut self: Box<Self>) -> Result<WholeRead, StorageError> {
        let key = std::mem::replace(&mut self.key, Ok(ObjectPath::default()))?;
        let Some(task) = self.task.take() else {
            return Err(StorageError::Io {
                op: "read",
                path: self.path.clone(),
                source: std::io::Error::other("the read was never started"),
            });
        };
        match self.shared.runtime.block_on(task) {
            Ok(Ok(read)) => Ok(read),
            Ok(Err(error)) => Err(self.shared.error("get", &key, error)),
            Err(joined) => Err(StorageError::Io {
                op: "read",
                path: self.path.clone(),
                source: std::io::Error::other(format!("the S3 read task failed: {joined}")),
            }),
        }
    }
}

impl Drop for S3PendingRead {
    fn drop(&mut self) {
        // An abandoned read (the epoch ended, or a read before it failed) stops at once
        // instead of finishing its GET for nobody.
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn scrub(mut message: String, secrets: &[String]) -> String {
    for secret in secrets {
        // A credential of a few characters (`k`, `s` in a test) would match inside ordinary
        // words and garble the message (`li<redacted>t`) without hiding anything: a string that
        // short is found by guessing. Real keys are 20 (id) and 40 (secret) characters.
        if secret.chars().count() >= MIN_SCRUBBED_CREDENTIAL {
            message = message.replace(secret.as_str(), "<redacted>");
        }
    }
    message
}

/// Credentials shorter than this are not scrubbed from messages (see [`scrub`]).
const MIN_SCRUBBED_CREDENTIAL: usize = 6;

impl Storage for S3Storage {
    fn engine(&self) -> &'static str {
        "s3"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            alignment: 1,
            batched: true,
            io_depth: u32::try_from(self.shared.io_depth).unwrap_or(u32::MAX),
            nowait_reads: false,
            buffer_page_offset: None,
        }
    }

    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        let key = self.key_of(path)?;
        let shared = &self.shared;
        let meta = shared
            .runtime
            .block_on(shared.store.head(&key))
            .map_err(|e| shared.error("open (HEAD)", &key, e))?;
        Ok(Box::new(S3Read {
            shared: Arc::clone(shared),
            key,
            path: path.to_path_buf(),
            len: meta.size,
        }))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        let key = self.key_of(path)?;
        Ok(Box::new(S3Write {
            shared: Arc::clone(&self.shared),
            key,
            path: path.to_path_buf(),
            buffer: Vec::new(),
            filled: 0,
            upload: None,
            parts: VecDeque::new(),
            written: 0,
        }))
    }

    fn list(&self, dir: &Path) -> Result<Vec<DirEntry>, StorageError> {
        let mut entries = Vec::new();
        self.list_each(dir, &mut |entry| entries.push(entry))?;
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(entries)
    }

    /// One LIST page (up to 1000 keys) at a time, each handed over before the next is asked
    /// for: a prefix of 5x10^7 objects is never held whole (object_store's
    /// `list_with_delimiter` gathers every page first).
    fn list_each(&self, dir: &Path, each: &mut dyn FnMut(DirEntry)) -> Result<(), StorageError> {
        use object_store::list::{PaginatedListOptions, PaginatedListStore};
        let prefix = self.key_of(dir)?;
        let shared = &self.shared;
        // The paginated call takes the prefix as it is: the folder's keys are under `prefix/`.
        let folder = if prefix.as_ref().is_empty() {
            String::new()
        } else {
            format!("{}/", prefix.as_ref())
        };
        let mut page_token = None;
        let mut listed = 0usize;
        loop {
            let options = PaginatedListOptions {
                delimiter: Some("/".into()),
                page_token: page_token.take(),
                ..Default::default()
            };
            let page = shared
                .runtime
                .block_on(shared.store.list_paginated(Some(&folder), options))
                .map_err(|e| shared.error("list", &prefix, e))?;
            let name = |location: &ObjectPath| location.filename().unwrap_or_default().to_owned();
            for p in &page.result.common_prefixes {
                listed += 1;
                each(DirEntry {
                    path: dir.join(name(p)),
                    is_dir: true,
                    len: Some(0),
                });
            }
            for o in &page.result.objects {
                listed += 1;
                each(DirEntry {
                    path: dir.join(name(&o.location)),
                    is_dir: false,
                    len: Some(o.size),
                });
            }
            match page.page_token {
                Some(token) if !token.is_empty() => page_token = Some(token),
                _ => break,
            }
        }
        if listed == 0 {
            // Object stores have no empty directories: an empty prefix does not exist.
            return Err(StorageError::NotFound {
                path: dir.to_path_buf(),
            });
        }
        Ok(())
    }

    fn size(&self, path: &Path) -> Result<Option<u64>, StorageError> {
        let key = self.key_of(path)?;
        let shared = &self.shared;
        match shared.runtime.block_on(shared.store.head(&key)) {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(shared.error("stat (HEAD)", &key, e)),
        }
    }

    /// No local page cache holds objects: nothing to drop.
    /// One GET of the whole object on the client's runtime; its body is counted chunk by
    /// chunk as it arrives and dropped, so a window of such reads holds no object bytes.
    fn start_whole_read(&self, path: &Path, bell: &Arc<ReadBell>) -> Option<Box<dyn PendingRead>> {
        let started = Instant::now();
        let key = self.key_of(path);
        let shared = Arc::clone(&self.shared);
        let finished = Arc::new(AtomicBool::new(key.is_err()));
        let task = key.as_ref().ok().map(|key| {
            let key = key.clone();
            let store = Arc::clone(&self.shared.store);
            let ringer = Ringer {
                finished: Arc::clone(&finished),
                bell: Arc::clone(bell),
            };
            self.shared.runtime.spawn(async move {
                use futures_util::StreamExt;
                // Rings when the read ends however it ends (done, failed, aborted).
                let _ringer = ringer;
                let mut body = store.get(&key).await?.into_stream();
                let mut bytes = 0u64;
                while let Some(chunk) = body.next().await {
                    bytes += chunk?.len() as u64;
                }
                Ok(WholeRead {
                    bytes,
                    took: started.elapsed(),
                })
            })
        });
        Some(Box::new(S3PendingRead {
            path: path.to_path_buf(),
            key,
            task,
            shared,
            finished,
        }))
    }

    fn drop_cache(&self, _path: &Path) -> Result<(), StorageError> {
        Ok(())
    }

    /// Object stores have no directories: nothing to do.
    fn create_dir_all(&self, _dir: &Path) -> Result<(), StorageError> {
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> Result<(), StorageError> {
        let key = self.key_of(path)?;
        let shared = &self.shared;
        shared
            .runtime
            .block_on(shared.store.delete(&key))
            .map_err(|e| shared.error("delete", &key, e))
    }

    fn remove_dir_all(&self, dir: &Path) -> Result<(), StorageError> {
        let entries = match self.list(dir) {
            Ok(entries) => entries,
            Err(StorageError::NotFound { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        for entry in entries {
            if entry.is_dir {
                self.remove_dir_all(&entry.path)?;
            } else {
                self.remove_file(&entry.path)?;
            }
        }
        Ok(())
    }
}

struct S3Read {
    shared: Arc<Shared>,
    key: ObjectPath,
    path: PathBuf,
    len: u64,
}

impl S3Read {
    fn get(&self, range: Range<u64>) -> JoinHandle<object_store::Result<bytes::Bytes>> {
        let store = Arc::clone(&self.shared.store);
        let key = self.key.clone();
        self.shared
            .runtime
            .spawn(async move { store.get_range(&key, range).await })
    }

    /// Waits for the GET `handle` of `len` bytes at `offset` and returns them.
    fn fetch(
        &self,
        handle: JoinHandle<object_store::Result<bytes::Bytes>>,
        offset: u64,
        len: usize,
    ) -> Result<bytes::Bytes, StorageError> {
        let bytes = match self.shared.runtime.block_on(handle) {
            Ok(result) => result.map_err(|e| self.shared.error("read (GET)", &self.key, e))?,
            Err(join) => {
                return Err(StorageError::ObjectStore {
                    op: "read (GET)",
                    url: format!("s3://{}/{}", self.shared.bucket, self.key).into(),
                    endpoint: self.shared.endpoint.clone().into(),
                    message: join.to_string().into(),
                    hint: "the request task failed; retry",
                });
            }
        };
        if bytes.len() != len {
            return Err(StorageError::Truncated {
                path: self.path.clone(),
                offset: offset + bytes.len().min(len) as u64,
                wanted: len.saturating_sub(bytes.len()) as u64,
            });
        }
        Ok(bytes)
    }

    fn wait(
        &self,
        handle: JoinHandle<object_store::Result<bytes::Bytes>>,
        buf: &mut [u8],
        offset: u64,
    ) -> Result<(), StorageError> {
        let bytes = self.fetch(handle, offset, buf.len())?;
        buf.copy_from_slice(&bytes);
        Ok(())
    }

    /// [`StorageError::Truncated`] if `len` bytes at `offset` run past the object's end.
    fn check_in_object(&self, offset: u64, len: usize) -> Result<(), StorageError> {
        crate::check_in_file(&self.path, self.len, offset, len)
    }

    /// The stream's loop; `pending` holds the GETs started and not yet consumed, in order.
    fn stream(
        &self,
        limit: usize,
        block: usize,
        requests: &mut dyn Iterator<Item = Extent>,
        consume: &mut Consume<'_>,
        pending: &mut VecDeque<(Extent, JoinHandle<object_store::Result<bytes::Bytes>>)>,
    ) -> Result<(), StorageError> {
        loop {
            while pending.len() < limit {
                let Some(extent) = requests.next() else {
                    break;
                };
                check_extent(&self.path, extent, block)?;
                self.check_in_object(extent.offset, extent.len)?;
                if extent.len == 0 {
                    consume(extent.offset, &[])?;
                    continue;
                }
                let range = extent.offset..extent.offset + extent.len as u64;
                pending.push_back((extent, self.get(range)));
            }
            let Some((extent, handle)) = pending.pop_front() else {
                return Ok(());
            };
            let bytes = self.fetch(handle, extent.offset, extent.len)?;
            consume(extent.offset, &bytes)?;
        }
    }
}

impl ReadHandle for S3Read {
    fn path(&self) -> &Path {
        &self.path
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, StorageError> {
        let end = offset.saturating_add(buf.len() as u64).min(self.len);
        if end <= offset {
            return Ok(0);
        }
        let n = (end - offset) as usize;
        let handle = self.get(offset..end);
        self.wait(handle, &mut buf[..n], offset)?;
        Ok(n)
    }

    fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> Result<(), StorageError> {
        self.check_in_object(offset, buf.len())?;
        if buf.is_empty() {
            return Ok(());
        }
        let handle = self.get(offset..offset + buf.len() as u64);
        self.wait(handle, buf, offset)
    }

    fn read_batch(&mut self, requests: &mut [ReadRequest<'_>]) -> Result<(), StorageError> {
        for r in requests.iter() {
            self.check_in_object(r.offset, r.buf.len())?;
        }
        let mut pending = VecDeque::with_capacity(self.shared.io_depth);
        let mut next = 0;
        for index in 0..requests.len() {
            while next < requests.len() && pending.len() < self.shared.io_depth {
                let r = &requests[next];
                let range = r.offset..r.offset + r.buf.len() as u64;
                pending.push_back(self.get(range));
                next += 1;
            }
            let Some(handle) = pending.pop_front() else {
                break;
            };
            let request = &mut requests[index];
            self.wait(handle, request.buf, request.offset)?;
        }
        Ok(())
    }

    /// Keeps `min(io_depth, slots)` GETs in flight and consumes each in request order,
    /// straight from the GET's own buffer (`window` only bounds how many are in flight). On
    /// an error the GETs still running are aborted: they write only into their own buffers,
    /// never into the caller's memory.
    fn read_stream(
        &mut self,
        window: &mut [u8],
        block: usize,
        requests: &mut dyn Iterator<Item = Extent>,
        consume: &mut Consume<'_>,
    ) -> Result<(), StorageError> {
        let slots = stream_slots(&self.path, window.len(), block)?;
        let limit = slots.min(self.shared.io_depth).max(1);
        let mut pending = VecDeque::with_capacity(limit);
        let result = self.stream(limit, block, requests, consume, &mut pending);
        for (_, handle) in pending {
            handle.abort();
        }
        result
    }
}

/// An object being written: buffered, then one PUT or a multipart upload.
struct S3Write {
    shared: Arc<Shared>,
    key: ObjectPath,
    path: PathBuf,
    /// The bytes to send are `buffer[..filled]`; beyond, up to its length, the buffer holds
    /// bytes of an earlier object that it was pooled with (initialised memory to write over).
    buffer: Vec<u8>,
    filled: usize,
    upload: Option<Box<dyn MultipartUpload>>,
    parts: VecDeque<JoinHandle<object_store::Result<()>>>,
    written: u64,
}

impl S3Write {
    fn wait_part(&mut self) -> Result<(), StorageError> {
        let Some(handle) = self.parts.pop_front() else {
            return Ok(());
        };
        match self.shared.runtime.block_on(handle) {
            Ok(result) => result.map_err(|e| self.shared.error("upload part", &self.key, e)),
            Err(join) => Err(StorageError::ObjectStore {
                op: "upload part",
                url: format!("s3://{}/{}", self.shared.bucket, self.key).into(),
                endpoint: self.shared.endpoint.clone().into(),
                message: join.to_string().into(),
                hint: "the upload task failed; retry",
            }),
        }
    }

    /// Starts the multipart upload with the buffered bytes (a single-PUT buffer grown past
    /// [`SINGLE_PUT_BYTES`]) cut into parts of [`S3_PART_BYTES`].
    fn start_multipart(&mut self) -> Result<(), StorageError> {
        let buffered = self.take_filled(Vec::new());
        for part in buffered.chunks(S3_PART_BYTES) {
            self.buffer = part.to_vec();
            self.filled = part.len();
            self.send_part()?;
        }
        Ok(())
    }

    /// Sends the buffered part (exactly `S3_PART_BYTES`) as the next part of the upload.
    fn send_part(&mut self) -> Result<(), StorageError> {
        if self.upload.is_none() {
            let shared = &self.shared;
            let upload = shared
                .runtime
                .block_on(shared.store.put_multipart(&self.key))
                .map_err(|e| shared.error("start multipart upload", &self.key, e))?;
            self.upload = Some(upload);
        }
        while self.parts.len() >= PARTS_IN_FLIGHT {
            self.wait_part()?;
        }
        let part = self.take_filled(Vec::with_capacity(S3_PART_BYTES));
        if let Some(upload) = &mut self.upload {
            let future = upload.put_part(PutPayload::from(part));
            self.parts.push_back(self.shared.runtime.spawn(future));
        }
        Ok(())
    }
}

impl WriteHandle for S3Write {
    fn path(&self) -> &Path {
        &self.path
    }

    fn write_all(&mut self, mut data: &[u8]) -> Result<(), StorageError> {
        self.append(data.len(), &mut |room| {
            let (now, rest) = data.split_at(room.len());
            room.copy_from_slice(now);
            data = rest;
        })
    }

    /// The object's bytes are made in its PUT buffer: a generated object is not copied into it.
    fn fill_in_place(
        &mut self,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<bool, StorageError> {
        self.append(len, fill)?;
        Ok(true)
    }

    /// Objects are durable once published; nothing to do before.
    fn sync(&mut self) -> Result<(), StorageError> {
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<u64, StorageError> {
        self.finish()
    }
}

impl S3Write {
    /// The bytes written so far (`buffer[..filled]`), leaving `next` as the empty buffer.
    fn take_filled(&mut self, next: Vec<u8>) -> Vec<u8> {
        let mut filled = std::mem::replace(&mut self.buffer, next);
        filled.truncate(std::mem::take(&mut self.filled));
        filled
    }

    /// Appends `len` bytes, written into the buffer by `fill` a piece at a time; a full buffer
    /// starts (or continues) the multipart upload.
    fn append(
        &mut self,
        mut len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), StorageError> {
        while len > 0 {
            // Up to SINGLE_PUT_BYTES the object is one PUT; beyond, parts of S3_PART_BYTES.
            let limit = if self.upload.is_none() {
                SINGLE_PUT_BYTES
            } else {
                S3_PART_BYTES
            };
            if self.buffer.capacity() == 0 {
                self.buffer = self.shared.buffers.take();
                let want = S3_PART_BYTES.min(len.max(1 << 16));
                // Room for `want` bytes from the start (a pooled buffer's length is old bytes).
                let more = want.saturating_sub(self.buffer.len());
                self.buffer.reserve_exact(more);
            }
            let take = len.min(limit - self.filled);
            let end = self.filled + take;
            // Room the buffer never held bytes in is zeroed first (it is not initialised
            // memory); a pooled buffer's earlier bytes are written over as they are.
            if self.buffer.len() < end {
                self.buffer.resize(end, 0);
            }
            fill(&mut self.buffer[self.filled..end]);
            self.filled = end;
            self.written += take as u64;
            len -= take;
            if self.filled == limit && len > 0 {
                if self.upload.is_none() {
                    self.start_multipart()?;
                } else {
                    self.send_part()?;
                }
            }
        }
        Ok(())
    }

    /// Publishes the object: one PUT, or the multipart upload's last part and completion.
    fn finish(&mut self) -> Result<u64, StorageError> {
        let shared = Arc::clone(&self.shared);
        if self.upload.is_none() {
            let payload = shared.buffers.payload(self.take_filled(Vec::new()));
            shared
                .runtime
                .block_on(shared.store.put(&self.key, payload))
                .map_err(|e| shared.error("write (PUT)", &self.key, e))?;
            return Ok(self.written);
        }
        if self.filled > 0 {
            self.send_part()?;
        }
        while !self.parts.is_empty() {
            self.wait_part()?;
        }
        if let Some(mut upload) = self.upload.take()
            && let Err(e) = shared.runtime.block_on(upload.complete())
        {
            let _ = shared.runtime.block_on(upload.abort());
            return Err(shared.error("complete multipart upload", &self.key, e));
        }
        Ok(self.written)
    }
}

impl Drop for S3Write {
    fn drop(&mut self) {
        // Uncommitted: abort the multipart upload so its parts are not kept (and billed).
        if let Some(mut upload) = self.upload.take() {
            for handle in self.parts.drain(..) {
                handle.abort();
            }
            let _ = self.shared.runtime.block_on(upload.abort());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{BufferPool, POOLED_BUFFER_BYTES, POOLED_BUFFERS};

    #[test]
    fn a_put_body_returns_its_buffer_when_the_client_drops_it_and_the_pool_stays_bounded() {
        let pool = Arc::new(BufferPool::default());
        let mut buffer = pool.take();
        assert_eq!(buffer.capacity(), 0, "an empty pool gives a new buffer");
        buffer.extend_from_slice(&[7u8; 300 << 10]);
        let address = buffer.as_ptr();
        let payload = pool.payload(buffer);
        assert_eq!(payload.content_length(), 300 << 10);
        assert_eq!(
            pool.free.lock().unwrap().len(),
            0,
            "still owned by the body"
        );
        drop(payload);
        let again = pool.take();
        assert!(again.capacity() >= 300 << 10);
        assert_eq!(again.as_ptr(), address, "the same memory, no new pages");
        // Its bytes are kept as they were, to be written over without zeroing them again.
        assert_eq!(again.len(), 300 << 10);
        assert!(again.iter().all(|&b| b == 7));
        // Oversized buffers are not kept, and at most POOLED_BUFFERS are.
        pool.give(Vec::with_capacity(POOLED_BUFFER_BYTES + 1));
        assert_eq!(pool.free.lock().unwrap().len(), 0);
        for _ in 0..POOLED_BUFFERS + 5 {
            pool.give(Vec::with_capacity(4096));
        }
        assert_eq!(pool.free.lock().unwrap().len(), POOLED_BUFFERS);
    }

    #[test]
    fn short_credentials_do_not_garble_messages_and_real_ones_are_hidden() {
        let secrets = vec!["s".to_string(), "wJalrXUtnFEMI/K7MDENG".to_string()];
        let message = super::scrub(
            "list request failed; signed with wJalrXUtnFEMI/K7MDENG".into(),
            &secrets,
        );
        assert_eq!(message, "list request failed; signed with <redacted>");
    }

    use super::*;

    const REFUSED: &str = "Generic S3 error: Error performing list request: Error performing GET \
        http://127.0.0.1:9000/bkt?list-type=2 in 4ms - Server returned non-2xx status code: \
        403 Forbidden: <?xml version=\"1.0\" encoding=\"utf-8\"?>\n<Error><Code>\
        SignatureDoesNotMatch</Code><Message>The request signature we calculated does not \
        match the signature you provided.</Message><BucketName>bkt</BucketName></Error>";

    #[test]
    fn an_address_endpoint_is_path_style_and_a_named_one_takes_the_bucket_in_front() {
        assert!(endpoint_host_is_an_address("http://127.0.0.1:9000"));
        assert!(endpoint_host_is_an_address("https://[::1]:9000"));
        assert!(endpoint_host_is_an_address("http://localhost:5000"));
        assert!(!endpoint_host_is_an_address(
            "https://minio.lab.example:9000"
        ));
        assert_eq!(
            virtual_hosted("https://s3.example.com:9000", "data").unwrap(),
            "https://data.s3.example.com:9000"
        );
        assert_eq!(
            virtual_hosted("https://data.s3.example.com", "data").unwrap(),
            "https://data.s3.example.com"
        );
        let err = virtual_hosted("not a url", "data").unwrap_err().to_string();
        assert!(err.contains("endpoint_url `not a url`"), "{err}");
    }

    #[test]
    fn the_code_and_message_of_an_s3_error_body_are_found() {
        assert_eq!(xml_element(REFUSED, "Code"), Some("SignatureDoesNotMatch"));
        assert_eq!(
            xml_element(REFUSED, "Message"),
            Some("The request signature we calculated does not match the signature you provided.")
        );
        assert_eq!(xml_element(REFUSED, "RequestId"), None);
        assert_eq!(xml_element("<Code></Code>", "Code"), None);
        assert_eq!(xml_element("<Code>x", "Code"), None);
    }

    #[test]
    fn refusals_are_told_apart_by_code_then_by_status() {
        let classify = |code, status, message| Refusal::classify(code, status, message);
        assert_eq!(
            classify(Some("InvalidAccessKeyId"), false, ""),
            Some(Refusal::UnknownKey)
        );
        assert_eq!(
            classify(Some("SignatureDoesNotMatch"), false, REFUSED),
            Some(Refusal::WrongSecret)
        );
        assert_eq!(
            classify(Some("AccessDenied"), false, ""),
            Some(Refusal::Denied)
        );
        assert_eq!(
            classify(Some("ExpiredToken"), false, ""),
            Some(Refusal::Token)
        );
        // A HEAD has no body: the status is all there is.
        assert_eq!(classify(None, true, ""), Some(Refusal::Unspecified));
        assert_eq!(
            classify(None, false, "status code: 401 Unauthorized"),
            Some(Refusal::Unspecified)
        );
        assert_eq!(classify(Some("SlowDown"), false, "503"), None);
        assert_eq!(classify(None, false, "connection refused"), None);
        for refusal in [
            Refusal::UnknownKey,
            Refusal::WrongSecret,
            Refusal::Unspecified,
        ] {
            assert!(refusal.hint().contains("AWS_"), "{refusal:?}");
            assert_eq!(refusal.what(), "S3 authentication failed");
        }
    }

    #[test]
    fn a_refusal_message_names_the_endpoint_the_bucket_and_the_setting() {
        let error = StorageError::S3AccessRefused {
            what: Refusal::WrongSecret.what(),
            op: "list",
            url: "s3://bkt".into(),
            endpoint: "http://127.0.0.1:9000".into(),
            code: "SignatureDoesNotMatch".into(),
            reason: "The request signature we calculated does not match.".into(),
            hint: Refusal::WrongSecret.hint(),
        };
        assert_eq!(
            error.to_string(),
            "S3 authentication failed at http://127.0.0.1:9000: the server refused to list \
             s3://bkt (SignatureDoesNotMatch: The request signature we calculated does not \
             match.); the secret does not match the access key id: check \
             storage.storage_options.secret_access_key (or AWS_SECRET_ACCESS_KEY), and \
             storage_options.region"
        );
    }
}

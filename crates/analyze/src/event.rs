//! One trace line in, one classified interval record out. Accepts what dftracer writes
//! (numbers or strings for every value, `fhash` + `FH` metadata or a plain `fname`) and
//! what dlio writes.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Any JSON value, keeping only what the analysis needs.
#[derive(Debug, Default)]
pub(crate) enum Scalar<'a> {
    Int(i64),
    Float(f64),
    Str(Cow<'a, str>),
    #[default]
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for Scalar<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Scalar<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Scalar::Int(i64::from(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Scalar::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(i64::try_from(v).map_or(Scalar::Float(v as f64), Scalar::Int))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Scalar::Float(v))
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Owned(v)))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Other)
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl Scalar<'_> {
    pub(crate) fn as_i64(&self) -> Option<i64> {
        match self {
            Scalar::Int(v) => Some(*v),
            Scalar::Float(v) if v.is_finite() => Some(*v as i64),
            Scalar::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// A time in microseconds (number or decimal string) as integer nanoseconds.
    pub(crate) fn micros_as_nanos(&self) -> Option<i64> {
        match self {
            Scalar::Int(v) => v.checked_mul(1000),
            Scalar::Float(v) if v.is_finite() => Some((v * 1000.0).round() as i64),
            Scalar::Str(s) => decimal_micros_as_nanos(s.trim()),
            _ => None,
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// Exact parse of `123` / `123.4567` microseconds into nanoseconds (sub-ns digits dropped).
fn decimal_micros_as_nanos(s: &str) -> Option<i64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let whole: i64 = int.parse().ok()?;
    let mut ns = 0i64;
    let digits = frac.as_bytes();
    for i in 0..3 {
        let d = match digits.get(i) {
            Some(c) if c.is_ascii_digit() => i64::from(c - b'0'),
            Some(_) => return None,
            None => 0,
        };
        ns = ns * 10 + d;
    }
    if digits.iter().skip(3).any(|c| !c.is_ascii_digit()) {
        return None;
    }
    let sign = if int.starts_with('-') { -1 } else { 1 };
    whole.checked_mul(1000)?.checked_add(sign * ns)
}

#[derive(Debug, Deserialize, Default)]
pub(crate) struct RawArgs<'a> {
    #[serde(borrow, default)]
    pub fhash: Scalar<'a>,
    #[serde(borrow, default)]
    pub fname: Scalar<'a>,
    #[serde(borrow, default)]
    pub name: Scalar<'a>,
    #[serde(borrow, default)]
    pub value: Scalar<'a>,
    #[serde(borrow, default)]
    pub count: Scalar<'a>,
    #[serde(borrow, default)]
    pub size: Scalar<'a>,
    #[serde(borrow, default)]
    pub ret: Scalar<'a>,
    #[serde(borrow, default)]
    pub offset: Scalar<'a>,
    #[serde(borrow, default)]
    pub fd: Scalar<'a>,
    #[serde(borrow, default)]
    pub buf_page_offset: Scalar<'a>,
    #[serde(borrow, default)]
    pub untouched_pages: Scalar<'a>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct RawEvent<'a> {
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub cat: Option<Cow<'a, str>>,
    /// `"X"`/`"M"` (Chrome's phases, dftracer 1.x and dlio) or dftracer 2.x's integers.
    #[serde(borrow, default)]
    pub ph: Scalar<'a>,
    #[serde(borrow, default)]
    pub pid: Scalar<'a>,
    #[serde(borrow, default)]
    pub tid: Scalar<'a>,
    #[serde(borrow, default)]
    pub ts: Scalar<'a>,
    #[serde(borrow, default)]
    pub dur: Scalar<'a>,
    #[serde(borrow, default)]
    pub args: Option<RawArgs<'a>>,
}

/// The phases of an event that the analysis reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// A complete event: a span or an I/O call with `ts` and `dur`.
    Complete,
    /// Metadata: file names (`FH`), host and process records, thread names.
    Metadata,
    /// Anything else (counters, aggregated records, instants): counted, not analysed.
    Other,
}

impl RawEvent<'_> {
    /// The event's phase: Chrome's letters (`X`, `M`) or dftracer 2.x's numbers (1 complete,
    /// 2 counter, 3 aggregated, 4 metadata). `None` when the line has no phase.
    pub(crate) fn phase(&self) -> Option<Phase> {
        // dftracer 2.x's `start` and `end` records are complete events of its own category,
        // but say when tracing began and ended, not what the application did.
        if self.cat.as_deref() == Some("dftracer")
            && matches!(self.name.as_deref(), Some("start" | "end"))
        {
            return Some(Phase::Metadata);
        }
        match &self.ph {
            Scalar::Str(p) => Some(match p.as_ref() {
                "X" => Phase::Complete,
                "M" => Phase::Metadata,
                _ => Phase::Other,
            }),
            Scalar::Int(1) => Some(Phase::Complete),
            Scalar::Int(4) => Some(Phase::Metadata),
            Scalar::Int(_) => Some(Phase::Other),
            _ => None,
        }
    }
}

/// dfanalyzer's layers (plus the union of all I/O), in report order. Each span or I/O
/// event belongs to at most one layer besides `App` (which holds every event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub(crate) enum Layer {
    App = 0,
    Train,
    Evaluate,
    Compute,
    Fetch,
    Reader,
    ReaderPosix,
    Checkpoint,
    CheckpointPosix,
    OtherPosix,
    Comm,
    /// Spans outside the taxonomy: only in `App`.
    Other,
    /// An I/O event whose file is not yet classified (reader or checkpoint); resolved when
    /// every file name is known.
    Io,
}

pub(crate) const LAYER_COUNT: usize = 13;

impl Layer {
    pub(crate) const REPORTED: [Layer; 11] = [
        Layer::App,
        Layer::Train,
        Layer::Evaluate,
        Layer::Compute,
        Layer::Fetch,
        Layer::Reader,
        Layer::ReaderPosix,
        Layer::Checkpoint,
        Layer::CheckpointPosix,
        Layer::OtherPosix,
        Layer::Comm,
    ];

    pub(crate) fn from_u8(v: u8) -> Layer {
        const ALL: [Layer; LAYER_COUNT] = [
            Layer::App,
            Layer::Train,
            Layer::Evaluate,
            Layer::Compute,
            Layer::Fetch,
            Layer::Reader,
            Layer::ReaderPosix,
            Layer::Checkpoint,
            Layer::CheckpointPosix,
            Layer::OtherPosix,
            Layer::Comm,
            Layer::Other,
            Layer::Io,
        ];
        ALL.get(usize::from(v)).copied().unwrap_or(Layer::Other)
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Layer::App => "app",
            Layer::Train => "train",
            Layer::Evaluate => "evaluate",
            Layer::Compute => "compute",
            Layer::Fetch => "fetch",
            Layer::Reader => "reader",
            Layer::ReaderPosix => "reader POSIX",
            Layer::Checkpoint => "checkpoint",
            Layer::CheckpointPosix => "checkpoint POSIX",
            Layer::OtherPosix => "other POSIX",
            Layer::Comm => "comm",
            Layer::Other => "other",
            Layer::Io => "I/O",
        }
    }

    pub(crate) fn is_io(self) -> bool {
        matches!(
            self,
            Layer::ReaderPosix | Layer::CheckpointPosix | Layer::OtherPosix | Layer::Io
        )
    }
}

/// What an I/O call does to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Op {
    Span = 0,
    Open,
    Close,
    Read,
    Write,
    Seek,
    Meta,
    /// A memory mapping of a file (`mmap`): the bytes read through it move by page faults,
    /// which no call shows.
    Map,
}

impl Op {
    pub(crate) fn from_u8(v: u8) -> Op {
        match v {
            1 => Op::Open,
            2 => Op::Close,
            3 => Op::Read,
            4 => Op::Write,
            5 => Op::Seek,
            6 => Op::Meta,
            7 => Op::Map,
            _ => Op::Span,
        }
    }
}

fn is_io_category(cat: &str) -> bool {
    dlio_trace::IO_CATEGORIES
        .iter()
        .any(|c| c.eq_ignore_ascii_case(cat))
}

/// The op of an I/O event, from the call's name (dftracer's POSIX/STDIO names, ours, S3's).
pub(crate) fn io_op(name: &str) -> Op {
    match name {
        "open" | "open64" | "openat" | "openat64" | "creat" | "creat64" | "fopen" | "fopen64" => {
            Op::Open
        }
        "close" | "fclose" => Op::Close,
        "read" | "pread" | "pread64" | "readv" | "preadv" | "preadv64" | "preadv2" | "fread"
        | "GET" => Op::Read,
        "write" | "pwrite" | "pwrite64" | "writev" | "pwritev" | "pwritev64" | "pwritev2"
        | "fwrite" | "PUT" => Op::Write,
        "lseek" | "lseek64" | "fseek" | "fseeko" => Op::Seek,
        "mmap" | "mmap64" => Op::Map,
        _ => Op::Meta,
    }
}

/// The layer of a complete event, or `None` for events that only count towards `App`.
/// Recognises dftracer's AI taxonomy (what dlio writes) and the names DLIO 2.0 writes
/// with its own `dft_fn` decorators (`TorchFramework.compute`, `<module>.iter`, ...).
pub(crate) fn classify(cat: &str, name: &str) -> Layer {
    if is_io_category(cat) {
        return Layer::Io;
    }
    match cat {
        "compute" => Layer::Compute,
        "dataloader" if name.starts_with("fetch") && !name.ends_with(".block") => Layer::Fetch,
        "data" | "reader" => Layer::Reader,
        "data_loader" if name.ends_with("__getitem__") => Layer::Reader,
        // Pipes between a program's processes (`dlio trace` writes them as `IPC`).
        "comm" | dlio_trace::CAT_IPC => Layer::Comm,
        "pipeline" if name == "train" => Layer::Train,
        "pipeline" if name == "evaluate" || name == "test" => Layer::Evaluate,
        "checkpoint" if is_checkpoint_io_span(name) => Layer::Checkpoint,
        "ai_framework" if name.ends_with(".compute") => Layer::Compute,
        "dlio_benchmark" if name.ends_with("._train") => Layer::Train,
        "dlio_benchmark" if name.ends_with("._eval") => Layer::Evaluate,
        "dlio_benchmark" if name.ends_with(".iter") => Layer::Fetch,
        _ => Layer::Other,
    }
}

fn is_checkpoint_io_span(name: &str) -> bool {
    matches!(name, "capture" | "restart")
        || [
            ".save_state",
            ".load_state",
            ".checkpoint",
            ".save_checkpoint",
            ".load_checkpoint",
        ]
        .iter()
        .any(|s| name.ends_with(s))
}

/// True for a data item (one sample read), counted separately from the reader layer.
pub(crate) fn is_item(cat: &str, name: &str) -> bool {
    (cat == "data" && name == "item") || (cat == "data_loader" && name.ends_with("__getitem__"))
}

/// A file hash as written (`fhash`/FH `value`: hex text or a number).
pub(crate) fn parse_hash(s: &Scalar<'_>) -> Option<u64> {
    match s {
        Scalar::Str(t) => {
            let t = t.trim();
            u64::from_str_radix(t, 16)
                .ok()
                .or_else(|| Some(dlio_trace::name_hash(t.as_bytes())))
        }
        Scalar::Int(v) => Some(*v as u64),
        _ => None,
    }
}

/// A path counts as checkpoint I/O when one of its components mentions `checkpoint`.
pub(crate) fn is_checkpoint_path(path: &str) -> bool {
    path.split('/')
        .any(|c| c.to_ascii_lowercase().contains("checkpoint"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_micros_are_parsed_exactly() {
        assert_eq!(
            decimal_micros_as_nanos("1795945366789524"),
            Some(1_795_945_366_789_524_000)
        );
        assert_eq!(decimal_micros_as_nanos("12.345"), Some(12_345));
        assert_eq!(decimal_micros_as_nanos("12.3"), Some(12_300));
        assert_eq!(decimal_micros_as_nanos("12.34567"), Some(12_345));
        assert_eq!(decimal_micros_as_nanos("1x"), None);
        assert_eq!(decimal_micros_as_nanos("1.2x"), None);
    }

    #[test]
    fn layers_follow_the_ai_taxonomy_and_dlio_names() {
        use dlio_trace::ai;
        for (span, layer) in [
            (ai::COMPUTE, Layer::Compute),
            (ai::FETCH_ITER, Layer::Fetch),
            (ai::DATA_ITEM, Layer::Reader),
            (ai::DATA_PREPROCESS, Layer::Reader),
            (ai::PIPELINE_TRAIN, Layer::Train),
            (ai::PIPELINE_EVALUATE, Layer::Evaluate),
            (ai::CHECKPOINT_CAPTURE, Layer::Checkpoint),
            (ai::CHECKPOINT_RESTART, Layer::Checkpoint),
            (ai::COMM_BARRIER, Layer::Comm),
            (ai::EPOCH_BLOCK, Layer::Other),
        ] {
            assert_eq!(classify(span.cat, span.name), layer, "{span:?}");
        }
        assert_eq!(
            classify("ai_framework", "TorchFramework.compute"),
            Layer::Compute
        );
        assert_eq!(classify("dlio_benchmark", "<module>.iter"), Layer::Fetch);
        assert_eq!(
            classify("data_loader", "TorchDataset.__getitem__"),
            Layer::Reader
        );
        assert_eq!(classify("POSIX", "pread64"), Layer::Io);
        assert_eq!(
            classify("checkpoint", "PyTorchCheckpointing.get_tensor"),
            Layer::Other
        );
        assert!(is_checkpoint_path("/out/checkpoints/unet3d/layer-0.pt"));
        assert!(!is_checkpoint_path("/data/train/img_0.npz"));
    }
}

//! What dlio knows of a format before it opens a file, declared beside each format's code: a
//! [`FormatDescriptor`] in the format's own file, and one row for it in [`FORMATS`].
//!
//! Everything else that asks "which formats ...?" asks this table: the constructor a run uses,
//! the formats the MLPerf fork reads without decoding, the formats whose file size says whether
//! a file is whole, the element type images force, the format a traced program's files are in
//! (by magic bytes and extension), the format's own config checks, and the list of built-in
//! formats an error names. Config keeps only the names (`dataset.format`, so that a misspelt
//! format is refused with its file and line before any format code runs).

use dlio_config::{ConfigError, DatasetConfig, ElementType, FormatKind, Semantics};

use crate::{Format, FormatError};

/// How a run reads: whether samples are decoded (upstream DLIO's readers) or read as bytes (the
/// MLPerf fork's), and whether TFRecord data CRCs are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadSettings {
    /// Decode samples as `np.load`, PIL, h5py and tf.data do (`--semantics upstream`).
    pub decode: bool,
    /// Check each TFRecord record's data CRC.
    pub check_tfrecord_crc: bool,
    /// Read each file a reader reads whole and undecoded in one request of the file's size,
    /// not in requests of [`crate::CHUNK_BYTES`]: what request patterns
    /// (`reader.sample_requests`) shape. Memory per reader is then the largest file.
    pub whole_reads: bool,
}

impl ReadSettings {
    /// Decode everything and check every CRC: what generation and format tests use.
    pub const FULL: ReadSettings = ReadSettings {
        decode: true,
        check_tfrecord_crc: true,
        whole_reads: false,
    };

    /// The settings of a run under `semantics`.
    pub fn for_run(semantics: Semantics, check_tfrecord_crc: bool) -> ReadSettings {
        ReadSettings {
            decode: semantics.decodes(),
            check_tfrecord_crc,
            whole_reads: false,
        }
    }
}

/// A format's constructor from the `dataset` section and how the run reads.
pub type BuildFormat = fn(&DatasetConfig, ReadSettings) -> Result<Box<dyn Format>, FormatError>;

/// A format's checks of the `dataset` section: warnings, or the first rule broken.
pub type CheckDataset = fn(&DatasetConfig) -> Result<Vec<String>, ConfigError>;

/// One format, as the rest of dlio needs to know it.
#[derive(Debug)]
pub struct FormatDescriptor {
    /// The `dataset.format` name it serves.
    pub kind: FormatKind,
    /// Other names a workload may give it.
    pub aliases: &'static [&'static str],
    /// File name extensions (lowercase, no dot) its files carry in other programs' data sets,
    /// for telling a traced program's format; DLIO's own extension is the format's
    /// [`Format::extension`].
    pub extensions: &'static [&'static str],
    /// The bytes every file of the format starts with; empty when it has none.
    pub magic: &'static [u8],
    /// Each sample's bytes are stored as they are (no encoding, when uncompressed), so a file
    /// shorter than samples x sample bytes cannot be whole.
    pub stores_samples_as_they_are: bool,
    /// Under the MLPerf fork's semantics its files are read whole and nothing is decoded (the
    /// fork's npz, npy, image and hdf5 readers); under upstream's they are decoded.
    pub read_as_bytes_by_the_fork: bool,
    /// The element type its samples always have, whatever `record_element_type` says (images
    /// are uint8 in DLIO).
    pub element: Option<ElementType>,
    /// Whether this build has it (hdf5 needs the `hdf5` feature).
    pub built: bool,
    /// Its checks of the `dataset` section, beyond config's own: warnings, or the first rule
    /// broken.
    pub check: CheckDataset,
    /// Its constructor from the `dataset` section and how the run reads.
    pub build: BuildFormat,
}

/// A format with no checks of its own.
pub(crate) fn no_checks(_: &DatasetConfig) -> Result<Vec<String>, ConfigError> {
    Ok(Vec::new())
}

/// Every format dlio names, one row each.
pub const FORMATS: &[FormatDescriptor] = &[
    crate::npz::DESCRIPTOR,
    crate::npy::DESCRIPTOR,
    HDF5,
    crate::csv::DESCRIPTOR,
    crate::image::JPEG,
    crate::image::PNG,
    crate::tfrecord::DESCRIPTOR,
    crate::indexed_binary::DESCRIPTOR,
    crate::indexed_binary::MMAP_DESCRIPTOR,
    crate::synthetic::DESCRIPTOR,
    crate::parquet::DESCRIPTOR,
    crate::arrow::DESCRIPTOR,
    HDF5_OPT,
];

#[cfg(feature = "hdf5")]
const HDF5: FormatDescriptor = crate::hdf5::DESCRIPTOR;

/// HDF5 in a build without the HDF5 C library: named, refused with the way to get it.
#[cfg(not(feature = "hdf5"))]
const HDF5: FormatDescriptor = FormatDescriptor {
    kind: FormatKind::Hdf5,
    aliases: &[],
    extensions: &["h5", "hdf5", "hdf"],
    magic: b"\x89HDF",
    stores_samples_as_they_are: true,
    read_as_bytes_by_the_fork: true,
    element: None,
    built: false,
    check: no_checks,
    build: |_, _| {
        Err(FormatError::unsupported(
            "this dlio was built without HDF5",
            "rebuild with --features hdf5 (needs libhdf5-dev: apt-get install libhdf5-dev)",
        ))
    },
};

/// `hdf5_opt`: accepted because upstream's enum has it; neither upstream nor dlio can generate
/// or read it.
const HDF5_OPT: FormatDescriptor = FormatDescriptor {
    kind: FormatKind::Hdf5Opt,
    aliases: &[],
    extensions: &[],
    magic: &[],
    stores_samples_as_they_are: false,
    read_as_bytes_by_the_fork: false,
    element: None,
    built: false,
    check: no_checks,
    build: |_, _| {
        Err(FormatError::UnsupportedFormat {
            format: FormatKind::Hdf5Opt.name(),
        })
    },
};

/// The descriptor of `kind` (by name or alias); a name no row has gets [`UNKNOWN`], which
/// refuses to build or check, naming the formats there are. (A binary registers the names
/// before loading a workload, [`register_format_names`], so a misspelt format is refused
/// with its file and line first.)
pub fn descriptor(kind: FormatKind) -> &'static FormatDescriptor {
    FORMATS
        .iter()
        .find(|d| d.kind == kind || d.aliases.contains(&kind.name()))
        .unwrap_or(&UNKNOWN)
}

/// The row of a name no format has.
const UNKNOWN: FormatDescriptor = FormatDescriptor {
    kind: FormatKind::new("(unknown)"),
    aliases: &[],
    extensions: &[],
    magic: &[],
    stores_samples_as_they_are: false,
    read_as_bytes_by_the_fork: false,
    element: None,
    built: false,
    check: |dataset| {
        Err(ConfigError::Invalid {
            key: "dataset.format".into(),
            message: format!(
                "is `{}`, which is not a format dlio has ({}).",
                dataset.format,
                FORMATS
                    .iter()
                    .map(|d| d.kind.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            fix: "set dataset.format to one of them".into(),
        })
    },
    build: |dataset, _| {
        Err(FormatError::UnsupportedFormat {
            format: dataset.format.name(),
        })
    },
};

/// Every format's name and aliases, for [`dlio_config::register_format_names`].
pub fn format_names() -> Vec<(&'static str, &'static [&'static str])> {
    FORMATS.iter().map(|d| (d.kind.name(), d.aliases)).collect()
}

/// Registers the table's format names with config, so that loading a workload refuses a
/// misspelt `dataset.format` with its file and line (call before loading).
pub fn register_format_names() {
    dlio_config::register_format_names(format_names());
}

/// The names of the formats this build generates and reads, comma-separated.
pub fn built_in_formats() -> String {
    let mut names: Vec<&str> = FORMATS
        .iter()
        .filter(|d| d.built)
        .map(|d| d.kind.name())
        .collect();
    if !HDF5.built {
        names.push("(hdf5 needs a build with --features hdf5)");
    }
    names.join(", ")
}

/// The format `dataset` describes, with its settings, as a run under `read` reads it: the
/// descriptor's constructor, wrapped to read whole files undecoded where the fork does.
pub fn format_with(
    dataset: &DatasetConfig,
    read: ReadSettings,
) -> Result<Box<dyn Format>, FormatError> {
    let descriptor = descriptor(dataset.format);
    let format = (descriptor.build)(dataset, read)?;
    Ok(if descriptor.read_as_bytes_by_the_fork && !read.decode {
        Box::new(crate::raw::Undecoded {
            inner: format,
            whole_reads: read.whole_reads,
        })
    } else {
        format
    })
}

/// The format's own checks of `dataset` (warnings, or the first rule broken).
pub fn check_dataset(dataset: &DatasetConfig) -> Result<Vec<String>, ConfigError> {
    (descriptor(dataset.format).check)(dataset)
}

/// The element type the samples of `dataset` really have.
pub fn sample_element(dataset: &DatasetConfig) -> ElementType {
    descriptor(dataset.format)
        .element
        .unwrap_or(dataset.record_element_type)
}

/// The format whose magic bytes `head` (a file's first bytes) starts with.
pub fn format_by_magic(head: &[u8]) -> Option<&'static FormatDescriptor> {
    FORMATS
        .iter()
        .find(|d| !d.magic.is_empty() && head.starts_with(d.magic))
        .or_else(|| {
            // TFRecord has no magic: its first record's length and that length's masked
            // CRC-32C are as good (12 bytes that match by chance once in 2^32).
            let len: [u8; 8] = head.get(..8)?.try_into().ok()?;
            let crc = u32::from_le_bytes(head.get(8..12)?.try_into().ok()?);
            (crate::tfrecord::masked_crc32c(&len) == crc)
                .then(|| FORMATS.iter().find(|d| d.kind == FormatKind::Tfrecord))
                .flatten()
        })
}

/// The format whose files carry `extension` (any case, no dot).
pub fn format_by_extension(extension: &str) -> Option<&'static FormatDescriptor> {
    let extension = extension.to_ascii_lowercase();
    FORMATS
        .iter()
        .find(|d| d.extensions.contains(&extension.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The formats config names, and every row of the table.
    fn every_kind() -> Vec<FormatKind> {
        FORMATS.iter().map(|d| d.kind).collect()
    }

    #[test]
    fn every_format_name_has_one_descriptor() {
        for kind in every_kind() {
            assert_eq!(
                FORMATS.iter().filter(|d| d.kind == kind).count(),
                1,
                "{kind:?}"
            );
            assert_eq!(descriptor(kind).kind, kind);
            for alias in descriptor(kind).aliases {
                assert_eq!(descriptor(FormatKind::new(alias)).kind, kind);
            }
        }
        for named in [
            FormatKind::Npz,
            FormatKind::Npy,
            FormatKind::Hdf5,
            FormatKind::Csv,
            FormatKind::Jpeg,
            FormatKind::Png,
            FormatKind::Tfrecord,
            FormatKind::IndexedBinary,
            FormatKind::MmapIndexedBinary,
            FormatKind::Synthetic,
            FormatKind::Parquet,
            FormatKind::Arrow,
            FormatKind::Hdf5Opt,
        ] {
            assert_eq!(descriptor(named).kind, named);
        }
        // A name no row has: building and checking it are refused, naming the formats.
        let unknown = DatasetConfig {
            format: FormatKind::new("npzz"),
            ..DatasetConfig::default()
        };
        let error = check_dataset(&unknown).unwrap_err().to_string();
        assert!(
            error.contains("npzz") && error.contains("tfrecord"),
            "{error}"
        );
        assert!(format_with(&unknown, ReadSettings::FULL).is_err());
    }

    #[test]
    fn formats_are_told_by_their_first_bytes_and_extensions() {
        let name = |d: Option<&FormatDescriptor>| d.map(|d| d.kind.name());
        assert_eq!(name(format_by_magic(b"PK\x03\x04rest")), Some("npz"));
        assert_eq!(name(format_by_magic(b"\x93NUMPY\x01")), Some("npy"));
        assert_eq!(name(format_by_magic(b"\x89HDF\r\n")), Some("hdf5"));
        assert_eq!(name(format_by_magic(b"\xff\xd8\xff\xe0")), Some("jpeg"));
        assert_eq!(name(format_by_magic(b"\x89PNG\r\n")), Some("png"));
        assert_eq!(name(format_by_magic(b"PAR1\x15")), Some("parquet"));
        assert_eq!(name(format_by_magic(b"\x00\x01")), None);
        assert_eq!(name(format_by_extension("TFRecords")), Some("tfrecord"));
        assert_eq!(name(format_by_extension("h5")), Some("hdf5"));
        assert_eq!(name(format_by_extension("jpg")), Some("jpeg"));
        assert_eq!(name(format_by_extension("csv")), Some("csv"));
        assert_eq!(name(format_by_extension("bin")), None);
    }

    #[test]
    fn the_fork_reads_the_bytes_of_exactly_the_formats_it_does_not_decode() {
        let as_bytes: Vec<&str> = FORMATS
            .iter()
            .filter(|d| d.read_as_bytes_by_the_fork)
            .map(|d| d.kind.name())
            .collect();
        assert_eq!(as_bytes, ["npz", "npy", "hdf5", "jpeg", "png"]);
    }

    #[test]
    fn image_formats_check_their_dims_and_warn_of_their_element_type() {
        let dataset = |format, dims: &[u64], element| DatasetConfig {
            format,
            record_dims: dims.to_vec(),
            record_element_type: element,
            ..DatasetConfig::default()
        };
        let refused = check_dataset(&dataset(FormatKind::Png, &[3, 8, 8], ElementType::Uint8))
            .expect_err("three dims");
        assert!(
            refused.to_string().contains(
                "png format does not support more than 2 dimensions, but got 3 dimensions."
            ),
            "{refused}"
        );
        let refused = check_dataset(&dataset(
            FormatKind::Jpeg,
            &[1, 2, 3, 4],
            ElementType::Uint8,
        ))
        .expect_err("four dims");
        assert!(
            refused.to_string().contains("but got 4 dimensions."),
            "{refused}"
        );
        let warned = check_dataset(&dataset(FormatKind::Jpeg, &[8, 8], ElementType::Float32))
            .expect("two dims");
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(warned[0].contains("images are always uint8"), "{warned:?}");
        let image = dataset(FormatKind::Jpeg, &[8, 8], ElementType::Float32);
        assert_eq!(sample_element(&image), ElementType::Uint8);
        let npz = dataset(FormatKind::Npz, &[8, 8], ElementType::Float32);
        assert_eq!(sample_element(&npz), ElementType::Float32);
        assert!(check_dataset(&npz).expect("npz").is_empty());
    }
}

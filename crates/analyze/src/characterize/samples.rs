//! What a sample is: the data files, their sizes and format, whether a sample is a whole file
//! or a slice of one, how many there are and how many epochs read them.

use std::collections::{HashMap, HashSet};

use super::requests::{CommonPattern, PatternStep, common_patterns, size_shares, union_bytes};
use super::stream::{Columnar, Stream};
use super::trace_view::{DataSet, burst_of};
use super::{Activity, Found, SizeShare, Stats, WHOLE_READ_LIMIT};
use crate::ingest::Rec;
use crate::timeline::Timeline;

/// The shortest per-opening time written (`reader.open_time`): under it, a sleep's slack and
/// the replay's own handovers.
const MIN_OPEN_WORK_S: f64 = 100e-6;

/// What the samples section found.
pub(super) struct Samples<'t> {
    /// A sample is a whole file (each opening read within one step), else a slice of one.
    pub whole_files: bool,
    /// The data files' sizes.
    pub file_sizes: Stats,
    /// Data files read.
    pub num_files: u64,
    /// The request sizes of the data reads, most frequent first.
    pub shares: Vec<SizeShare>,
    /// The most frequent request size.
    pub dominant: u64,
    /// One event per sample read: the file's opening, or the slice's read.
    pub events: Vec<&'t Rec>,
    /// Samples in the data set (files times samples per file).
    pub in_data_set: u64,
    /// How many times the data set was read.
    pub epochs: u64,
    /// The files are read as record streams (a tf.data pipeline), when they are.
    pub stream: Option<Stream>,
    /// Samples each event stands for: a row group's rows when whole row groups are read.
    pub unit_rows: u64,
    /// The files are columnar, read by row group, when they are.
    pub columnar: Option<Columnar>,
    /// The format's own reads replay the traced ones (a stream's buffer, a row group's
    /// chunks, one read a record): no request keys are needed.
    pub format_reads: bool,
    /// Samples each epoch reads when fewer than the data set holds (windows drawn at random
    /// from files that hold more): `train.total_training_steps` caps the epoch.
    pub epoch_samples: Option<u64>,
    /// Each sample is a window an opening read at an offset of its own (a random crop).
    pub windows: bool,
    /// Bytes each opening read elsewhere in the file before its window (an index entry looked
    /// up first): `dataset.header_read_bytes`, and not part of the window's requests.
    pub lookup: Option<u64>,
    /// Each epoch's samples are drawn with replacement, when they are.
    pub draws: Option<Draws>,
    /// The samples are rows read through HDF5's sieve buffer: an event is a window read, and
    /// rows inside the window before them were read without one.
    pub sieve: bool,
    /// The request patterns of the openings of files read whole in one request (empty when
    /// none describes them, or files are not read so).
    pub patterns: Vec<CommonPattern>,
    /// The buffered stream the openings read through, when one makes their requests.
    pub buffered: Option<super::buffered::BufferedFit<'t>>,
    /// Each file is read whole in a step by several openings, one range of this many bytes
    /// each (the last shorter): the requests of the replay.
    pub ranges: Option<u64>,
}

impl Samples<'_> {
    /// For draws with replacement whose epochs the program does not show (one process draws
    /// on and on), the epochs whose whole steps of `batch` add up to the draws' steps: 230
    /// draws in batches of 5 are 46 steps, which 8 epochs of 6 steps made 48 (240 draws,
    /// 4% more bytes) and 23 epochs of 2 make exactly. Unchanged when no count of epochs
    /// divides the steps into epochs the data set holds.
    pub fn draws_in_whole_steps(&mut self, batch: u64) -> Option<String> {
        let draws = self.draws.as_ref().filter(|d| !d.epochs_seen)?;
        let batch = batch.max(1);
        let steps = ((self.events.len() as f64 / batch as f64).round() as u64).max(1);
        let most_a_epoch = (draws.data_set / batch).max(1);
        let now = self.epochs;
        if now * ((self.per_epoch() as f64 / batch as f64).round() as u64) == steps {
            return None;
        }
        let epochs = epochs_dividing(steps, most_a_epoch, now)?;
        self.epochs = epochs;
        self.epoch_samples = Some(steps / epochs * batch).filter(|&n| n < self.in_data_set);
        Some(format!(
            "{} draws in batches of {batch} are {steps} steps: {epochs} epochs of {} (for {now} \
             epochs, which do not divide them)",
            self.events.len(),
            steps / epochs
        ))
    }

    /// Samples an epoch reads: the data set's, or fewer where the steps cap the epoch.
    pub fn per_epoch(&self) -> u64 {
        self.epoch_samples.unwrap_or(self.in_data_set)
    }

    /// Samples the program took: one per event, but through a sieve the epochs' rows, of which
    /// some came from the window read before them without an event of their own.
    pub fn consumed(&self) -> u64 {
        if self.sieve {
            self.epochs * self.per_epoch()
        } else {
            self.events.len() as u64
        }
    }
}

/// The samples section: `dataset.*` (format, files, samples per file, record length and
/// shape) and `semantics` where samples are slices of files DLIO's readers read per sample.
///
/// One piece (about 190 lines) on purpose: each finding (file sizes, samples per file, the
/// epochs' visiting orders, record sizes and shapes) is read by the ones after it and all of
/// them end in one `Samples` and its reasons; cut apart, the parts would pass most of a dozen
/// locals back and forth.
pub(super) fn samples<'t>(
    t: &Timeline,
    data: &DataSet,
    activity: &Activity<'t>,
) -> (Samples<'t>, Found) {
    let mut found = Found::default();
    let (reads, opens) = (&activity.reads, &activity.opens);
    let whole_files = whole_files_read(data, activity);
    // Files read whole in a step by several openings, a range each (ranged GETs): a sample is
    // the file.
    let ranged = if whole_files {
        ranged_files(data, activity)
    } else {
        None
    };
    // Openings that each read a small window of a large file (a random crop of an audio or
    // video file): a sample is the window, not the file.
    let crop = if whole_files && ranged.is_none() {
        crops(data, activity)
    } else {
        None
    };
    let whole_files = whole_files && crop.is_none();

    let sizes: Vec<f64> = data
        .files
        .iter()
        .map(|f| data.totals.get(f).map_or(0, |t| t.size) as f64)
        .collect();
    let file_sizes = Stats::of(&sizes);
    let num_files = data.files.len() as u64;
    let dataset_bytes: f64 = sizes.iter().sum();
    let shares = size_shares(reads);
    let dominant = match &crop {
        Some(c) => c.bytes,
        None => shares.first().map_or(0, |s| s.size),
    };
    let sample_file = data.files.iter().next().map(|f| t.path(*f));
    let (format, format_evidence) = format_of(&data.extension, sample_file, whole_files);
    if format == "tfrecord"
        && let Some(stream) = super::stream::stream_of(t, data, activity)
    {
        return stream_samples(data, activity, stream, format_evidence);
    }
    if format == "parquet"
        && let Some((columnar, visits)) = super::stream::columnar_of(t, data, activity)
    {
        return columnar_samples(data, activity, columnar, visits, format_evidence);
    }
    if !whole_files
        && matches!(format, "indexed_binary" | "npy" | "arrow")
        && let Some(intervals) = tiled_records(data, activity)
    {
        return tiled_samples(data, activity, intervals);
    }
    // Stored chunks of their own sizes (compressed), read again and again, several a step:
    // a sample is a chunk.
    if !whole_files && let Some(chunks) = reread_chunks(&activity.reads) {
        return chunk_samples(data, activity, chunks);
    }

    // The buffered stream the reads went through, if one makes them. Many runs of
    // contiguous reads an opening, each at a place of its own (a zip's members read through
    // one ZipFile a thread, an archive's utterances): each run is a record, the sample.
    let fit = super::buffered::buffered_stream(&activity.calls, data);
    let records_in_runs = !whole_files
        && crop.is_none()
        && fit.as_ref().is_some_and(|f| {
            f.runs >= 2 * opens.len().max(1) && f.matched >= 2 * opens.len().max(1)
        });
    let record_starts: HashMap<u64, HashSet<u64>> = match (&fit, records_in_runs) {
        (Some(fit), true) => {
            let mut starts: HashMap<u64, HashSet<u64>> = HashMap::new();
            for (first, _) in &fit.taken {
                starts
                    .entry(first.file)
                    .or_default()
                    .insert(first.offset as u64);
            }
            starts
        }
        _ => HashMap::new(),
    };
    let (format, format_evidence) = if records_in_runs {
        (
            "indexed_binary",
            format!(
                "{format_evidence}; its records are read one run of requests each through a \
                 buffered stream, each of its own size and place: emulated by indexed_binary \
                 records"
            ),
        )
    } else {
        (format, format_evidence)
    };
    // Rows of a contiguous HDF5 dataset read through h5py's sieve buffer: each read is a
    // window from a row on, the row is the sample.
    let sieve = if !whole_files && format == "hdf5" {
        sieved_rows(reads, dominant)
    } else {
        None
    };
    // Per sample: which burst, which thread; and the epochs' visiting orders.
    let sample_events: Vec<&Rec> = if let Some(r) = &ranged {
        r.firsts.clone()
    } else if whole_files || crop.is_some() {
        opens.clone()
    } else if let Some(sieve) = &sieve {
        sieve.events.clone()
    } else if let (Some(fit), true) = (&fit, records_in_runs) {
        let mut firsts: Vec<&Rec> = fit.taken.iter().map(|&(r, _)| r).collect();
        firsts.sort_by_key(|r| (r.start, r.rank, r.tid));
        firsts
    } else {
        reads
            .iter()
            .copied()
            .filter(|r| r.bytes as u64 == dominant)
            .collect()
    };
    // dlio replays request patterns for files it reads whole in one request (up to
    // `dlio_format::WHOLE_READ_MAX_BYTES`, 256 MiB); larger files keep a distribution.
    let patterns = if whole_files && ranged.is_none() && file_sizes.max <= WHOLE_READ_LIMIT as f64 {
        common_patterns(&activity.calls, data)
    } else {
        Vec::new()
    };
    // Whole files or windows read through a buffered stream (Python's file objects), one run
    // of contiguous reads an opening: the stream's requests, not drawn sizes, replay theirs.
    // A pattern that only half the openings make or more (the rest variants of it) gives way
    // to a buffered stream that makes every opening's requests. (A single pattern under 80%
    // comes only from `requests::made_by_half`: any other choice covers 80% of the openings.)
    let half_only = matches!(patterns.as_slice(), [p] if p.share < 0.8);
    let buffered = match fit {
        Some(fit)
            if (whole_files || crop.is_some())
                && ranged.is_none()
                && (patterns.is_empty() || half_only)
                && fit.runs as f64 <= 1.1 * opens.len() as f64 =>
        {
            Some(fit)
        }
        Some(fit) if records_in_runs => Some(fit),
        _ => None,
    };
    let patterns = if half_only && buffered.is_some() {
        Vec::new()
    } else {
        patterns
    };
    // A window or a record is what the program took of it: the stream's last fill reads past
    // it.
    let taken_bytes: Option<Vec<u64>> = buffered
        .as_ref()
        .filter(|_| crop.is_some() || records_in_runs)
        .map(|fit| fit.consumed());
    let dominant = match &taken_bytes {
        Some(taken) => taken.iter().sum::<u64>() / taken.len().max(1) as u64,
        None => dominant,
    };
    // dlio replays a program's own requests only through the readers that read whole files
    // as they are: files of another format (tf.data's snapshot shards are TFRecord framed,
    // read a record's fields at a time) become npy files of the same size.
    let (format, format_evidence) =
        if !patterns.is_empty() && !matches!(format, "npz" | "npy" | "jpeg" | "png" | "hdf5") {
            (
                "npy",
                format!(
                    "{format_evidence}; read whole in the program's own requests, which dlio's \
                 {format} reader does not make: emulated by npy files of the same size, whose \
                 reads take those requests"
                ),
            )
        } else {
            (format, format_evidence)
        };
    let members = members_read_apart(&patterns, file_sizes.median as u64);
    // An HDF5 sample's read followed by a read of its label (an images dataset and a labels
    // dataset): the label reads are the format's, not requests of the sample's.
    let labels = if !whole_files && format == "hdf5" {
        label_reads(reads, &sample_events)
    } else {
        None
    };
    let shares = match &labels {
        Some(l) => size_shares(
            &reads
                .iter()
                .copied()
                .filter(|r| !l.reads.contains(&(r.rank, r.tid, r.start)))
                .collect::<Vec<_>>(),
        ),
        None => shares,
    };
    // Slices read more often an epoch than the files hold them (a database's pages, its index
    // pages read again for each row): epochs are the generations of worker processes.
    // Slices of files of many sizes: the mean file's, so that the files hold the bytes the
    // program's did (the median's lost 18% of a token stream's shards of 1.4 to 3.5 MB).
    // Windows: as many as fit in the median file.
    let slice_file_bytes = if crop.is_some() {
        file_sizes.median
    } else {
        file_sizes.mean
    };
    let slices_per_file = ((slice_file_bytes / dominant.max(1) as f64).round() as u64).max(1);
    let reread = if whole_files
        || crop.is_some()
        || sieve.is_some()
        || labels.as_ref().is_some_and(|l| l.per_file.is_some())
        || !record_starts.is_empty()
    {
        None
    } else {
        // Without the training process's own reads when worker processes read the batches
        // (a scan of the labels before training).
        let consumer = activity.consumer.as_ref().map(|c| c.pid);
        let of_workers = |r: &&Rec| Some(r.rank) != consumer;
        let events: Vec<&Rec> = sample_events.iter().copied().filter(of_workers).collect();
        let worker_reads: Vec<&Rec> = reads.iter().copied().filter(of_workers).collect();
        reread_slices(&events, &worker_reads, num_files, slices_per_file)
    };
    let samples_per_file = if whole_files {
        members.unwrap_or(1)
    } else if let Some(sieve) = &sieve {
        sieve.rows
    } else if let Some(count) = labels.as_ref().and_then(|l| l.per_file) {
        count
    } else if !record_starts.is_empty() {
        // The records each file's runs start at, the median file.
        let mut counts: Vec<u64> = record_starts.values().map(|s| s.len() as u64).collect();
        counts.sort_unstable();
        counts[counts.len() / 2].max(1)
    } else if let Some((_, per_epoch)) = reread {
        per_epoch.div_ceil(num_files.max(1))
    } else {
        slices_per_file
    };
    if let Some(l) = &labels {
        found.param("dataset.hdf5.label_read", l.kind.into(), l.evidence.clone());
    }
    // Files that come again within an epoch, some several times and others not at all: draws
    // with replacement, from a data set larger than the files seen.
    let draws = (whole_files && members.is_none())
        .then(|| drawn_with_replacement(&sample_events, generation_starts(reads).len() as u64))
        .flatten();
    let samples_in_data_set = match &draws {
        Some(d) => d.data_set,
        None => (num_files * samples_per_file).max(1),
    };
    // Whole passes over the data set, or its share in each epoch, when no rule below decides.
    let passes = whole_or_shared_epochs(sample_events.len() as u64, samples_in_data_set);
    let epochs = if let Some(d) = &draws {
        d.epochs
    } else if let Some((generations, _)) = reread {
        generations
    } else if let Some(sieve) = &sieve {
        sieve.epochs(samples_in_data_set, num_files)
    } else if crop.is_some() {
        // Windows drawn at random: as many epochs as it takes to hold them (or as the
        // generations of worker processes started again for each epoch, when the data set
        // holds each one's windows), each reading its share, which
        // `train.total_training_steps` caps.
        let least = (sample_events.len() as u64).div_ceil(samples_in_data_set);
        let generations = (generation_starts(reads).len() as u64).max(1);
        // More generations than the least epochs: each then reads fewer windows than the
        // data set holds.
        if generations > least && generations <= sample_events.len() as u64 {
            generations
        } else {
            least.max(1)
        }
    } else {
        passes.0
    };
    let shared =
        crop.is_none() && draws.is_none() && reread.is_none() && sieve.is_none() && passes.1;
    let epoch_samples = (crop.is_some() || draws.is_some() || shared)
        .then(|| sample_events.len() as u64 / epochs)
        .filter(|&n| n < samples_in_data_set);
    // The mean, not the median: dlio's generator draws sizes around `record_length_bytes`
    // as their mean, and a skewed set of files (lognormal sizes) loses bytes to the median.
    let record_length = if whole_files {
        sample_bytes_for_file(format, file_sizes.mean.round() as u64, samples_per_file)
    } else if let Some(sieve) = &sieve {
        sieve.stride
    } else {
        dominant
    };
    let record_stdev = if whole_files { file_sizes.stdev } else { 0.0 };

    found.param("dataset.format", format.into(), format_evidence);
    found.param(
        "dataset.num_files_train",
        draws
            .as_ref()
            .map_or(num_files, |d| d.data_set.max(num_files))
            .to_string(),
        match &draws {
            Some(d) => format!(
                "{num_files} files of .{} under {} were read ({} bytes in all), {} times in \
                 all; {}",
                data.extension,
                data.dir,
                dataset_bytes as u64,
                sample_events.len(),
                d.evidence
            ),
            None => format!(
                "{num_files} files of .{} under {} were read ({} bytes in all)",
                data.extension, data.dir, dataset_bytes as u64
            ),
        },
    );
    if data.subfolders > 1 {
        found.param(
            "dataset.num_subfolders_train",
            data.subfolders.to_string(),
            format!(
                "the files sit in {} folders under {} (class folders), read interleaved or in \
                 turn",
                data.subfolders, data.dir
            ),
        );
    }
    found.param(
        "dataset.num_samples_per_file",
        samples_per_file.to_string(),
        if let Some(members) = members {
            format!(
                "each opening of a data file is read within one step and reads one of {members} \
                 parts of it (its requests cover a part; the {members} kinds of opening \
                 together cover the file): a sample is such a part, read by an opening of \
                 its own"
            )
        } else if let Some(r) = &ranged {
            format!(
                "each data file is read whole within one step by several openings ({:.1} a \
                 file and step on average), each reading a range of its own (up to {} bytes): \
                 ranged requests in parallel, as an object store's client downloads an object; \
                 a sample is a file",
                r.openings_per_file, r.range
            )
        } else if whole_files {
            "each opening of a data file is read within one step: a sample is a file".into()
        } else if let Some(sieve) = &sieve {
            format!(
                "reads of {} bytes (or shorter, ending where the others end: the dataset's \
                 end) start on a grid of {} bytes from {} bytes into the file, so most of them \
                 overlap: each is h5py's sieve window from a row on, a sample is a row, and a \
                 file holds {} rows up to where the short reads end",
                sieve.window, sieve.stride, sieve.base, sieve.rows
            )
        } else if let Some(c) = &crop {
            format!(
                "each opening of a data file reads a window of {dominant} bytes (most often, or \
                 the mean of many sizes) at an \
                 offset of its own, {:.0}% of its file at most for most openings: a sample is such \
                 a window (a random crop), the file holds as many as fit",
                c.share * 100.0
            )
        } else if let Some((generations, per_epoch)) = reread {
            format!(
                "reads of {dominant} bytes, {per_epoch} for each of the {generations} \
                 generations of worker processes, more than the {slices_per_file} slices a file \
                 of {} bytes (mean) holds: slices read again within an epoch (a database's \
                 pages), so a file holds an epoch's reads",
                file_sizes.mean as u64
            )
        } else if !record_starts.is_empty() {
            format!(
                "the runs of contiguous reads through the buffered stream start at \
                 {samples_per_file} places of the median file, each run once an epoch: a sample \
                 is the record a run reads"
            )
        } else {
            format!(
                "files of {} bytes (mean) read in requests of {dominant} bytes across many \
                 steps: a sample is one such slice",
                slice_file_bytes as u64
            )
        },
    );
    found.param(
        "dataset.record_length_bytes",
        record_length.to_string(),
        if whole_files {
            format!(
                "mean file size {} bytes (median {}){}",
                file_sizes.mean.round() as u64,
                file_sizes.median as u64,
                size_note(format)
            )
        } else if crop.is_some() && taken_bytes.is_some() {
            format!(
                "the bytes the program took of a window (the mean): {dominant}; the buffered \
                 stream's last fill reads past it"
            )
        } else if crop.is_some() {
            format!("the bytes an opening read (most often, or the mean): {dominant}")
        } else if let Some(sieve) = &sieve {
            format!(
                "the step between the rows the sieve windows start at: {} bytes",
                sieve.stride
            )
        } else {
            format!(
                "the most frequent data read is {dominant} bytes ({} of {} reads)",
                shares[0].count,
                reads.len()
            )
        },
    );
    if record_stdev > 0.0 {
        let bins: Vec<SizeShare> = size_bins(sizes.iter().map(|&s| s as u64))
            .into_iter()
            .map(|b| SizeShare {
                size: sample_bytes_for_file(format, b.size, samples_per_file),
                count: b.count,
            })
            .collect();
        found.param(
            "dataset.record_length_bytes_distribution",
            bins.iter()
                .map(|s| format!("{{size: {}, weight: {}}}", s.size, s.count))
                .collect::<Vec<_>>()
                .join(", "),
            format!(
                "file sizes range from {} to {} bytes (mean {}, stdev {}){}: the generated \
                 files take the measured sizes, in {} equal shares of the files, rather than \
                 a normal law's draws",
                file_sizes.min as u64,
                file_sizes.max as u64,
                file_sizes.mean.round() as u64,
                record_stdev.round() as u64,
                size_note(format),
                bins.len()
            ),
        );
    } else if let Some(taken) = taken_bytes
        .as_ref()
        .filter(|t| size_bins(t.iter().copied()).len() > 1)
    {
        per_sample_sizes(&mut found, taken, "windows or records the program took");
    } else if let Some(c) = crop
        .as_ref()
        .filter(|c| c.lookup.is_some() && size_bins(c.windows.iter().copied()).len() > 1)
    {
        per_sample_sizes(&mut found, &c.windows, "windows read after the lookups");
    } else if whole_files {
        found.param(
            "dataset.record_dims",
            format!("[{record_length}]"),
            "every data file has the same size: one dimension keeps the generated files exactly \
             that size"
                .to_string(),
        );
    } else {
        found.param(
            "dataset.record_dims",
            format!("[{record_length}]"),
            "one dimension of the slice's size: the generated samples are exactly that size \
             (dlio's default shape, a square, would round it down)"
                .to_string(),
        );
    }
    if let Some(lookup) = crop
        .as_ref()
        .and_then(|c| c.lookup)
        .filter(|_| format == "indexed_binary")
    {
        found.param(
            "dataset.header_read_bytes",
            lookup.to_string(),
            format!(
                "80% or more of the openings read {lookup} bytes first, apart from their \
                 window (they seek between the two): the sample looked up in the file's own \
                 table before it is read; replayed as that many bytes of the file's start at \
                 each opening"
            ),
        );
    } else if let Some((openings, bytes)) = buffered
        .as_ref()
        .filter(|_| crop.is_some() && format == "indexed_binary")
        .and_then(|fit| fit.header)
    {
        found.param(
            "dataset.header_read_bytes",
            bytes.to_string(),
            format!(
                "{openings} openings read the file's first {bytes} bytes (the median) before \
                 they seek to the window: a library parsing the file's header"
            ),
        );
    }
    if let Some(sieve) = &sieve {
        found.param(
            "dataset.hdf5.sieve_bytes",
            sieve.window.to_string(),
            format!(
                "{} of the {} data reads are windows of {} bytes from a row on (or up to the \
                 dataset's end), {} rows of {} bytes each, and rows inside the window a thread \
                 read last are not read again: HDF5's sieve buffer over a contiguous dataset \
                 kept open",
                sieve.events.len(),
                reads.len(),
                sieve.window,
                sieve.window / sieve.stride,
                sieve.stride
            ),
        );
    }
    if !whole_files && matches!(format, "npz" | "npy" | "hdf5" | "jpeg" | "png") {
        found.param(
            "semantics",
            "upstream".into(),
            format!(
                "samples are slices of {format} files: DLIO's own readers read each sample's \
                 bytes, where MLPerf's fork (dlio's default) reads every byte of a file at each \
                 sample"
            ),
        );
    }

    (
        Samples {
            whole_files,
            file_sizes,
            num_files,
            shares,
            dominant,
            events: sample_events,
            in_data_set: samples_in_data_set,
            epochs,
            stream: None,
            unit_rows: 1,
            columnar: None,
            format_reads: sieve.is_some(),
            sieve: sieve.is_some(),
            patterns,
            buffered,
            ranges: ranged.as_ref().map(|r| r.range),
            epoch_samples,
            windows: crop.is_some(),
            lookup: crop.as_ref().and_then(|c| c.lookup),
            draws,
        },
        found,
    )
}

/// Files that several openings read whole within one step, each opening one range of its own
/// (an object store's client downloading an object by ranged GETs in parallel: a fresh
/// open, one read and a close a range).
struct Ranged<'t> {
    /// The first opening of each file in each step: one per sample.
    firsts: Vec<&'t Rec>,
    /// The most frequent read size: the range.
    range: u64,
    /// Openings per file and step, the mean.
    openings_per_file: f64,
}

/// [`Ranged`] when the steps show it: in nine of ten (file, step) pairs or more (eight at
/// least), two openings or more read the file, their reads cover nine tenths of it or more
/// and overlap by a tenth at most, and the median opening reads under half its file.
fn ranged_files<'t>(data: &DataSet, activity: &Activity<'t>) -> Option<Ranged<'t>> {
    if !activity.paused || activity.bursts.len() < 2 {
        return None;
    }
    let bursts = &activity.bursts;
    let mut opened: HashMap<(u64, usize), Vec<&Rec>> = HashMap::new();
    for o in &activity.opens {
        opened
            .entry((o.file, burst_of(bursts, o.start)))
            .or_default()
            .push(o);
    }
    let mut read: HashMap<(u64, usize), Vec<(u64, u64)>> = HashMap::new();
    for r in activity.reads.iter().filter(|r| r.offset >= 0) {
        read.entry((r.file, burst_of(bursts, r.start)))
            .or_default()
            .push((r.offset as u64, r.offset as u64 + r.bytes as u64));
    }
    if read.len() < 8 {
        return None;
    }
    let ranged = read
        .iter()
        .filter(|(pair, stretches)| {
            let size = data.totals.get(&pair.0).map_or(0, |t| t.size);
            let union = union_bytes(stretches.iter().copied());
            let total: u64 = stretches.iter().map(|(s, e)| e - s).sum();
            let openings = opened.get(pair).map_or(0, Vec::len);
            openings >= 2 && union * 10 >= size * 9 && total * 10 <= union * 11
        })
        .count();
    let shares: Vec<f64> = super::requests::openings(&activity.calls, data)
        .iter()
        .map(|(file, o)| {
            let size = data.totals.get(file).map_or(0, |t| t.size).max(1);
            union_bytes(o.covered.iter().copied()) as f64 / size as f64
        })
        .collect();
    if ranged * 10 < read.len() * 9 || Stats::of(&shares).median >= 0.5 {
        return None;
    }
    let mut firsts: Vec<&Rec> = read
        .keys()
        .filter_map(|pair| opened.get(pair)?.iter().copied().min_by_key(|o| o.start))
        .collect();
    firsts.sort_by_key(|o| (o.start, o.rank, o.tid));
    let openings: usize = read.keys().map(|p| opened.get(p).map_or(0, Vec::len)).sum();
    Some(Ranged {
        firsts,
        range: size_shares(&activity.reads).first().map_or(0, |s| s.size),
        openings_per_file: openings as f64 / read.len() as f64,
    })
}

/// The count of epochs nearest `near` (the fewer on a tie) that splits `steps` into epochs of
/// as many whole steps, `most_a_epoch` at most.
fn epochs_dividing(steps: u64, most_a_epoch: u64, near: u64) -> Option<u64> {
    (1..=steps)
        .filter(|e| steps.is_multiple_of(*e) && steps / e <= most_a_epoch)
        .min_by_key(|&e| (e.abs_diff(near), e))
}

/// An epoch of samples drawn with replacement (PyTorch's `RandomSampler(replacement=True)`, a
/// weighted sampler balancing classes).
#[derive(Debug, Clone)]
pub(super) struct Draws {
    /// The data set the draws come from, as many samples as uniform draws need to give the
    /// distinct samples seen (at least those).
    pub data_set: u64,
    /// Epochs: the generations of worker processes when they start again for each, else as
    /// many as the draws fill at one data set each (a sampler's default epoch length).
    pub epochs: u64,
    /// The epochs are the generations of worker processes (the program's own), not a count
    /// of data sets the draws fill.
    pub epochs_seen: bool,
    /// Why: the repeats and their counts.
    pub evidence: String,
}

/// The draws of an epoch with replacement, if the sample reads are that: some samples come
/// more than once, at counts that differ from one sample to the next (three or more counts),
/// and a tenth or more of the repeats come soon after the sample's previous read (within a
/// quarter of the distinct samples). Epochs of a permutation read every sample once each
/// (counts of E or E + 1 under a step cap), their repeats a whole epoch apart; a sample read
/// twice in a row (opened twice) repeats at once, every time.
pub(super) fn drawn_with_replacement(events: &[&Rec], generations: u64) -> Option<Draws> {
    let draws = events.len();
    if draws < 16 {
        return None;
    }
    // Per file: its reads so far, and the index of its last one.
    let mut seen: HashMap<u64, (u64, usize)> = HashMap::new();
    let mut gaps = Vec::new();
    for (i, r) in events.iter().enumerate() {
        let (count, last) = seen.entry(r.file).or_insert((0, i));
        if *count > 0 {
            gaps.push(i - *last);
        }
        *count += 1;
        *last = i;
    }
    let distinct = seen.len();
    let repeats = gaps.len();
    let soon = gaps.iter().filter(|&&g| g * 4 < distinct).count();
    let at_once = gaps.iter().filter(|&&g| g == 1).count();
    let kinds: HashSet<u64> = seen.values().map(|&(count, _)| count).collect();
    if repeats * 10 < draws || soon * 10 < repeats || at_once * 2 > repeats || kinds.len() < 3 {
        return None;
    }
    let data_set = population_of(distinct as u64, draws as u64);
    let epochs_seen = generations > 1 && generations <= draws as u64;
    let epochs = if epochs_seen {
        generations
    } else {
        whole_or_shared_epochs(draws as u64, data_set).0
    };
    // An epoch of more draws than the data set (a sampler's num_samples above its length)
    // needs as many samples: dlio's epoch reads at most its data set.
    let data_set = data_set.max(draws as u64 / epochs);
    let most = kinds.iter().max().copied().unwrap_or(0);
    Some(Draws {
        data_set,
        epochs,
        epochs_seen,
        evidence: format!(
            "{distinct} distinct files for {draws} reads, read 1 to {most} times each, {soon} \
             of the {repeats} repeats within {} reads of the previous one: draws with \
             replacement (reader.sample_replacement), from about {data_set} files, as many as \
             {draws} uniform draws need to find {distinct}",
            distinct / 4
        ),
    })
}

/// The size `n` of a data set from which `draws` uniform draws with replacement find
/// `distinct` different samples on average: `n (1 - (1 - 1/n)^draws) = distinct`, solved by
/// bisection (the left side grows with `n`, from `distinct` or less at `n = distinct`).
fn population_of(distinct: u64, draws: u64) -> u64 {
    let found = |n: f64| n * (1.0 - (1.0 - 1.0 / n).powf(draws as f64));
    let target = distinct as f64;
    let (mut low, mut high) = (distinct.max(1) as f64, (distinct.max(1) * 64) as f64);
    if found(high) < target {
        return high as u64;
    }
    for _ in 0..64 {
        let middle = (low + high) / 2.0;
        if found(middle) < target {
            low = middle;
        } else {
            high = middle;
        }
    }
    (high.round() as u64).max(distinct)
}

/// When each generation of reading processes began, in order: a process whose first data
/// read comes after every earlier one's last begins a new one (a PyTorch DataLoader's workers,
/// started again for each epoch). One start when one process reads; none without reads.
pub(super) fn generation_starts(reads: &[&Rec]) -> Vec<i64> {
    generations(reads).into_iter().map(|g| g[0]).collect()
}

/// Slices an epoch reads again (a database's pages: each row's lookup reads index and leaf
/// pages other rows share): the events are not a whole number of passes over the slices the
/// files hold (a quarter or more off), worker processes start again two times or more, and
/// each of their generations reads more slices than the files hold. Returns the generations
/// and the slices each reads.
fn reread_slices(
    events: &[&Rec],
    reads: &[&Rec],
    num_files: u64,
    per_file: u64,
) -> Option<(u64, u64)> {
    let held = num_files.max(1) * per_file;
    let passes = events.len() as f64 / held as f64;
    let generations = generation_starts(reads).len() as u64;
    let per_generation = events.len() as u64 / generations.max(1);
    let off = (passes - passes.round()).abs();
    (generations >= 2 && off >= 0.25 && per_generation > held)
        .then_some((generations, per_generation))
}

/// The generations of reading processes (see [`generation_starts`]), each as its processes'
/// first data reads, in time order (never empty).
pub(super) fn generations(reads: &[&Rec]) -> Vec<Vec<i64>> {
    let mut spans: HashMap<u32, (i64, i64)> = HashMap::new();
    for r in reads {
        let span = spans.entry(r.rank).or_insert((r.start, r.end));
        span.0 = span.0.min(r.start);
        span.1 = span.1.max(r.end);
    }
    let mut processes: Vec<(i64, i64)> = spans.into_values().collect();
    processes.sort_unstable();
    let mut generations: Vec<Vec<i64>> = Vec::new();
    let mut last_end = i64::MIN;
    for (first, last) in processes {
        match generations.last_mut() {
            Some(current) if first <= last_end => current.push(first),
            _ => generations.push(vec![first]),
        }
        last_end = last_end.max(last);
    }
    generations
}

/// Openings that read windows of their files: each opening's reads cover less than half its
/// file (the median opening), at offsets that are not the same for every opening of a file.
struct Crop {
    /// Bytes an opening read, the median.
    bytes: u64,
    /// The median opening's share of its file.
    share: f64,
    /// Bytes of the lookup each opening read first, away from its window (see [`lookup_of`]).
    lookup: Option<u64>,
    /// With a lookup: each opening's window, the bytes it read after it.
    windows: Vec<u64>,
}

/// The largest first read of an opening that is a lookup (an index entry, a page of a table)
/// rather than the start of its window.
const MAX_LOOKUP_BYTES: u64 = 4096;

/// The size of the first read of 80% or more of the openings, when they make two reads and that
/// first one is small (at most [`MAX_LOOKUP_BYTES`]), smaller than the second and apart from
/// it (the program seeks between the two): a loader that looks each sample up in the file's
/// offset table before it reads it in one read (MosaicML's MDS shards: 8 bytes of the table,
/// then the sample). Openings that read more after their first read (a video's header, its
/// index, then its frames) keep those requests.
fn lookup_of(openings: &[&[(u64, u64)]]) -> Option<u64> {
    let first_reads: Vec<u64> = openings
        .iter()
        .filter_map(|covered| match covered {
            [(s0, e0), (s1, e1)] if s1 != e0 && e0 - s0 < e1 - s1 => Some(e0 - s0),
            _ => None,
        })
        .collect();
    let size = super::mode(&first_reads);
    let made = first_reads.iter().filter(|&&b| b == size).count();
    (size > 0 && size <= MAX_LOOKUP_BYTES && made * 5 >= openings.len() * 4).then_some(size)
}

/// [`Crop`] when eight or more openings read windows of their files.
fn crops(data: &DataSet, activity: &Activity) -> Option<Crop> {
    let done: Vec<(u64, Vec<(u64, u64)>)> = super::requests::openings(&activity.calls, data)
        .into_iter()
        .map(|(file, o)| (file, o.covered))
        .collect();
    if done.len() < 8 {
        return None;
    }
    let lookup = lookup_of(&done.iter().map(|(_, o)| o.as_slice()).collect::<Vec<_>>());
    let mut bytes: Vec<f64> = Vec::new();
    let mut shares: Vec<f64> = Vec::new();
    let mut windows: Vec<u64> = Vec::new();
    // The furthest stretch each file's openings read: windows move, a header does not.
    let mut last_start: HashMap<u64, HashSet<u64>> = HashMap::new();
    for (file, o) in &done {
        let size = data.totals.get(file).map_or(0, |t| t.size).max(1);
        // The window is what follows the lookup, where the opening made one.
        let o = match (lookup, o.as_slice()) {
            (Some(l), [(s, e), rest @ ..]) if e - s == l && !rest.is_empty() => rest,
            _ => o.as_slice(),
        };
        let read = super::requests::union_bytes(o.iter().copied());
        if lookup.is_some() {
            windows.push(read);
        }
        bytes.push(read as f64);
        shares.push(read as f64 / size as f64);
        if let Some(&(start, _)) = o.iter().max_by_key(|s| s.1 - s.0) {
            last_start.entry(*file).or_default().insert(start);
        }
    }
    let share = Stats::of(&shares).median;
    // Most files' openings read their largest stretch at different offsets.
    let moving = last_start.values().filter(|s| s.len() > 1).count();
    // Crops of one size (most windows the median's, some cut at the file's end) keep it,
    // whole blocks as the program asked; windows of many sizes (an utterance of an archive a
    // time) take their mean, which the median would cut short.
    let stats = Stats::of(&bytes);
    let at_median = bytes.iter().filter(|&&b| b == stats.median).count();
    let window = if at_median * 2 >= bytes.len() {
        stats.median
    } else {
        stats.mean
    };
    (share < 0.5 && moving * 2 >= last_start.len()).then(|| Crop {
        bytes: window.round() as u64,
        share,
        lookup,
        windows,
    })
}

/// A read by its process, thread and start.
type ReadKey = (u32, u32, i64);

/// The reads of samples' labels that follow their samples' reads (see [`label_reads`]).
struct LabelReads {
    /// `element` or `to_end`.
    kind: &'static str,
    /// The label reads.
    reads: std::collections::HashSet<ReadKey>,
    /// Labels per file, when the reads that run to the labels' end tell.
    per_file: Option<u64>,
    evidence: String,
}

/// The reads of each sample's label in an HDF5 file: 80% or more of the sample reads (the
/// dominant size) followed on their thread, before its next sample read, by one read of the
/// same file elsewhere whose size is a multiple of 8 (int64 labels), each either 8 bytes
/// (`element`) or running to one end per file with a size that changes (`to_end`: h5py
/// reading `labels[i]` of a dataset opened for that access fills its sieve buffer from the
/// label to the dataset's end). With `to_end`, the file's labels are its samples: the longest
/// such read over 8, when under h5py's 64 KiB buffer.
fn label_reads(reads: &[&Rec], sample_events: &[&Rec]) -> Option<LabelReads> {
    if sample_events.len() < 8 {
        return None;
    }
    let dominant = sample_events[0].bytes;
    let mut by_thread: HashMap<(u32, u32), Vec<&Rec>> = HashMap::new();
    for r in reads {
        by_thread.entry((r.rank, r.tid)).or_default().push(r);
    }
    // (file, offset, bytes, key) of the read after each sample read, on its thread.
    let mut followers: Vec<(u64, i64, i64, ReadKey)> = Vec::new();
    for thread in by_thread.values_mut() {
        thread.sort_by_key(|r| r.start);
        for w in thread.windows(2) {
            let (sample, next) = (w[0], w[1]);
            if sample.bytes == dominant
                && next.bytes != dominant
                && next.file == sample.file
                && next.offset >= 0
                && next.bytes > 0
                && next.bytes % 8 == 0
            {
                followers.push((
                    next.file,
                    next.offset,
                    next.bytes,
                    (next.rank, next.tid, next.start),
                ));
            }
        }
    }
    if followers.len() * 10 < sample_events.len() * 8 {
        return None;
    }
    let n = followers.len();
    let element = followers.iter().filter(|f| f.2 == 8).count();
    let mut ends: HashMap<u64, HashMap<i64, usize>> = HashMap::new();
    for &(file, offset, bytes, _) in &followers {
        *ends
            .entry(file)
            .or_default()
            .entry(offset + bytes)
            .or_default() += 1;
    }
    let at_one_end: usize = ends.values().map(|e| e.values().max().unwrap_or(&0)).sum();
    let sizes: std::collections::HashSet<i64> = followers.iter().map(|f| f.2).collect();
    let reads = followers.iter().map(|f| f.3).collect();
    if element * 10 >= n * 9 {
        return Some(LabelReads {
            kind: "element",
            reads,
            per_file: None,
            evidence: format!(
                "{element} of the {} sample reads are followed by a read of 8 bytes elsewhere in \
                 the file: the sample's label",
                sample_events.len()
            ),
        });
    }
    if at_one_end * 10 >= n * 9 && sizes.len() > 2 {
        let longest = followers.iter().map(|f| f.2).max().unwrap_or(0) as u64;
        let per_file = (longest < 64 << 10).then_some(longest / 8);
        return Some(LabelReads {
            kind: "to_end",
            reads,
            per_file,
            evidence: format!(
                "{n} of the {} sample reads are followed by a read elsewhere in the file that \
                 runs to one end per file ({} sizes, 8 to {longest} bytes): h5py reading the \
                 sample's label from a labels dataset opened for the access, which fills its \
                 sieve buffer from the label to the dataset's end{}",
                sample_events.len(),
                sizes.len(),
                match per_file {
                    Some(k) => format!("; the longest holds all {k} labels of a file"),
                    None => String::new(),
                }
            ),
        });
    }
    None
}

/// Rows of a contiguous dataset read through HDF5's sieve buffer (h5py reading `images[i]` of
/// a dataset it keeps open): each read is a window of the buffer's size from a row's first
/// byte, or shorter where the dataset ends, and a row inside the window a thread read last is
/// served from it without a read.
#[derive(Debug)]
pub(super) struct SieveRows<'t> {
    /// The window's bytes (the sieve buffer's size).
    window: u64,
    /// Bytes per row: the step of the grid the windows start on.
    stride: u64,
    /// Where the first file's rows begin (its smallest window start).
    base: u64,
    /// Rows per file (median over the files).
    rows: u64,
    /// The window reads, in time order.
    events: Vec<&'t Rec>,
    /// Whether windows mostly follow each other (a row after the previous window's last).
    sequential: bool,
}

impl SieveRows<'_> {
    /// Epochs: the window reads over those an epoch makes. In order, an epoch reads one window
    /// per `window / stride` rows; in random order, every row but those that fall inside the
    /// window before them (about `window / stride - 1` rows in a file's).
    fn epochs(&self, rows_in_data_set: u64, files: u64) -> u64 {
        let per_window = (self.window / self.stride.max(1)).max(1);
        let per_epoch = if self.sequential {
            rows_in_data_set.div_ceil(per_window)
        } else {
            rows_in_data_set
                .saturating_sub(files * (per_window - 1))
                .max(rows_in_data_set.div_ceil(2))
        };
        ((self.events.len() as f64 / per_epoch.max(1) as f64).round() as u64).max(1)
    }
}

/// The fewest window reads for a sieve to be told from other slices.
const MIN_SIEVE_READS: usize = 16;

/// Sieve windows over rows, if the data reads are that: reads of the dominant size `window`
/// (16 or more, three quarters of all reads or more) start on a grid whose step (the
/// greatest common divisor of their distances from each file's first) is at most half the
/// window and 64 bytes or more, at more distinct places than a file's windows would need to
/// read it once in order; shorter reads on the grid that end where the dataset ends (the
/// most common end of such reads in the file) are windows too.
pub(super) fn sieved_rows<'t>(reads: &[&'t Rec], window: u64) -> Option<SieveRows<'t>> {
    let full: Vec<&Rec> = reads
        .iter()
        .copied()
        .filter(|r| r.bytes as u64 == window && r.offset >= 0)
        .collect();
    if full.len() < MIN_SIEVE_READS || full.len() * 4 < reads.len() * 3 {
        return None;
    }
    let mut base: HashMap<u64, i64> = HashMap::new();
    for r in &full {
        let b = base.entry(r.file).or_insert(r.offset);
        *b = (*b).min(r.offset);
    }
    let stride = full
        .iter()
        .fold(0u64, |g, r| gcd(g, (r.offset - base[&r.file]) as u64));
    if stride < 64 || stride * 2 > window {
        return None;
    }
    let distinct: HashSet<(u64, i64)> = full.iter().map(|r| (r.file, r.offset)).collect();
    if (distinct.len() as u64) * stride <= window * base.len() as u64 {
        return None;
    }
    let on_grid = |r: &Rec| {
        base.get(&r.file)
            .is_some_and(|&b| r.offset >= b && ((r.offset - b) as u64).is_multiple_of(stride))
    };
    // Each file's dataset end: the most common end of its short reads on the grid.
    let mut ends: HashMap<u64, HashMap<i64, usize>> = HashMap::new();
    for r in reads
        .iter()
        .filter(|r| r.bytes > 0 && (r.bytes as u64) < window && on_grid(r))
    {
        *ends
            .entry(r.file)
            .or_default()
            .entry(r.offset + r.bytes)
            .or_default() += 1;
    }
    let end_of: HashMap<u64, i64> = ends
        .into_iter()
        .filter_map(|(file, e)| {
            e.into_iter()
                .max_by_key(|&(end, n)| (n, end))
                .map(|(end, _)| (file, end))
        })
        .collect();
    let events: Vec<&Rec> = reads
        .iter()
        .copied()
        .filter(|r| {
            r.bytes as u64 == window && r.offset >= 0
                || (r.bytes as u64) < window
                    && on_grid(r)
                    && end_of.get(&r.file) == Some(&(r.offset + r.bytes))
        })
        .collect();
    // Rows per file: up to its dataset's end, or past its furthest window start by a window.
    let mut rows: Vec<u64> = base
        .iter()
        .map(|(file, &b)| {
            let end = end_of.get(file).copied().unwrap_or_else(|| {
                full.iter()
                    .filter(|r| r.file == *file)
                    .map(|r| r.offset + window as i64)
                    .max()
                    .unwrap_or(b)
            });
            ((end - b) as u64 / stride).max(1)
        })
        .collect();
    rows.sort_unstable();
    // In order: the next window on a thread starts at the first row the previous one did not
    // hold whole, inside it or where it ended.
    let mut last: HashMap<(u32, u32, u64), (i64, i64)> = HashMap::new();
    let (mut follows, mut pairs) = (0usize, 0usize);
    for r in &events {
        if let Some((prev_start, prev_end)) =
            last.insert((r.rank, r.tid, r.file), (r.offset, r.offset + r.bytes))
        {
            pairs += 1;
            follows += usize::from(r.offset > prev_start && r.offset <= prev_end);
        }
    }
    Some(SieveRows {
        window,
        stride,
        base: base.values().min().copied().unwrap_or(0) as u64,
        rows: rows[rows.len() / 2],
        events,
        sequential: pairs > 0 && follows * 2 >= pairs,
    })
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// How many samples a file holds when each opening reads one part of it: two or more
/// patterns, each reading less than three quarters of a file of `size` bytes and none the
/// rest, that together cover nine tenths of it or more (an npz whose openings each read one
/// array); `None` otherwise.
fn members_read_apart(patterns: &[CommonPattern], size: u64) -> Option<u64> {
    if patterns.len() < 2 || size == 0 || patterns.iter().any(|p| p.read_rest) {
        return None;
    }
    let stretches = |requests: &[PatternStep]| -> Vec<(u64, u64)> {
        requests
            .iter()
            .map(|&(from_end, offset, bytes)| {
                let at = if from_end {
                    size.saturating_sub(offset)
                } else {
                    offset.min(size)
                };
                (at, at.saturating_add(bytes).min(size))
            })
            .collect()
    };
    let each_part = patterns
        .iter()
        .all(|p| union_bytes(stretches(&p.requests).into_iter()) * 4 < size * 3);
    let together = union_bytes(patterns.iter().flat_map(|p| stretches(&p.requests)));
    (each_part && together * 10 >= size * 9).then_some(patterns.len() as u64)
}

/// The samples of record streams: each file's records, from its own framing; each file
/// opened once per epoch; the per-file sample sizes that give the files their traced size.
fn stream_samples<'t>(
    data: &DataSet,
    activity: &Activity<'t>,
    stream: Stream,
    format_evidence: String,
) -> (Samples<'t>, Found) {
    let mut found = Found::default();
    let num_files = data.files.len() as u64;
    let counts: Vec<f64> = stream.records.values().map(|r| r.len() as f64).collect();
    let per_file = (Stats::of(&counts).median.round() as u64).max(1);
    let file_size = |f: &u64| data.totals.get(f).map_or(0, |t| t.size);
    let sizes: Vec<f64> = data.files.iter().map(|f| file_size(f) as f64).collect();
    let file_sizes = Stats::of(&sizes);
    let sample_sizes: Vec<u64> = data
        .files
        .iter()
        .map(|f| sample_bytes_for_file("tfrecord", file_size(f), per_file))
        .collect();
    let mean = sample_sizes.iter().sum::<u64>() / num_files.max(1);
    let epochs = ((activity.opens.len() as f64 / num_files.max(1) as f64).round() as u64).max(1);
    found.param("dataset.format", "tfrecord".into(), format_evidence);
    files_read(
        &mut found,
        data,
        num_files,
        sizes.iter().sum::<f64>() as u64,
    );
    found.param(
        "dataset.num_samples_per_file",
        per_file.to_string(),
        format!(
            "the files hold {}-{} records each (their framing walked; the median)",
            Stats::of(&counts).min as u64,
            Stats::of(&counts).max as u64
        ),
    );
    found.param(
        "dataset.record_length_bytes",
        mean.to_string(),
        format!(
            "records of {:.0} bytes (mean){}",
            file_sizes.mean / per_file as f64,
            size_note("tfrecord")
        ),
    );
    if sample_sizes.iter().any(|&s| s != mean) {
        let bins = size_bins(sample_sizes.iter().copied());
        found.param(
            "dataset.record_length_bytes_distribution",
            bins.iter()
                .map(|s| format!("{{size: {}, weight: {}}}", s.size, s.count))
                .collect::<Vec<_>>()
                .join(", "),
            "each file's mean record, so that every generated file has its traced size (the \
             stream's refills then fall on the same steps)"
                .into(),
        );
    } else {
        found.param(
            "dataset.record_dims",
            format!("[{mean}]"),
            "every file's records have one size".into(),
        );
    }
    found.append(super::stream::stream_keys(&stream));
    (
        Samples {
            whole_files: true,
            file_sizes,
            num_files,
            shares: size_shares(&activity.reads),
            dominant: stream.transfer,
            events: activity.opens.clone(),
            in_data_set: (num_files * per_file).max(1),
            epochs,
            stream: Some(stream),
            unit_rows: 1,
            columnar: None,
            format_reads: true,
            epoch_samples: None,
            draws: None,
            sieve: false,
            windows: false,
            lookup: None,
            patterns: Vec::new(),
            buffered: None,
            ranges: None,
        },
        found,
    )
}

/// The records of files whose reads tile them: per data file, where its records begin and
/// their lengths, when in nine files of ten a run of its distinct (offset, length) reads, each
/// starting where the one before ended (or at the page or sector boundary after it: see
/// [`next_record_at`]) and each read as often as the others, covers four
/// fifths of the file or more, and no other read of the file overlaps it (a header and an
/// index before the records, a footer after them, read apart): records read one by one through
/// an index. `None` otherwise.
fn tiled_records(data: &DataSet, activity: &Activity) -> Option<HashMap<u64, Tiling>> {
    let size_of = |file: u64| data.totals.get(&file).map_or(0, |t| t.size);
    records_tiling(&activity.reads, size_of, data.files.len())
}

/// The records that tile one file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tiling {
    /// Where the first begins.
    start: u64,
    /// Where the last ends: past the records' lengths by the padding between them (records
    /// on page boundaries).
    end: u64,
    /// Their lengths, in the file's order.
    lengths: Vec<u64>,
}

/// [`tiled_records`] over `reads` of `files` data files whose sizes `size_of` gives.
fn records_tiling(
    data_reads: &[&Rec],
    size_of: impl Fn(u64) -> u64,
    files: usize,
) -> Option<HashMap<u64, Tiling>> {
    let mut reads: HashMap<u64, HashMap<(u64, u64), u64>> = HashMap::new();
    for r in data_reads {
        if r.offset >= 0 {
            *reads
                .entry(r.file)
                .or_default()
                .entry((r.offset as u64, r.bytes as u64))
                .or_default() += 1;
        }
    }
    let mut tiled: HashMap<u64, Tiling> = HashMap::new();
    for (&file, intervals) in &reads {
        let size = size_of(file);
        let mut sorted: Vec<(u64, u64, u64)> = intervals
            .iter()
            .map(|(&(offset, len), &n)| (offset, len, n))
            .collect();
        sorted.sort_unstable();
        // The runs of back-to-back intervals read equally often: the one of most bytes.
        let mut best: Option<(usize, usize, u64)> = None;
        let mut first = 0;
        for i in 1..=sorted.len() {
            let goes_on = i < sorted.len() && {
                let (prev, next) = (sorted[i - 1], sorted[i]);
                next_record_at(prev.0 + prev.1, next.0) && next.2 == prev.2
            };
            if !goes_on {
                let bytes: u64 = sorted[first..i].iter().map(|t| t.1).sum();
                if best.is_none_or(|(_, _, b)| bytes > b) {
                    best = Some((first, i, bytes));
                }
                first = i;
            }
        }
        let Some((from, to, _)) = best else {
            continue;
        };
        let (start, end) = (sorted[from].0, sorted[to - 1].0 + sorted[to - 1].1);
        let apart = sorted[..from]
            .iter()
            .chain(&sorted[to..])
            .all(|&(offset, len, _)| offset + len <= start || offset >= end);
        // What the run spans, the padding between its records included.
        if to - from >= 2 && apart && (end - start) * 5 >= size * 4 {
            let lengths = sorted[from..to].iter().map(|t| t.1).collect();
            tiled.insert(
                file,
                Tiling {
                    start,
                    end,
                    lengths,
                },
            );
        }
    }
    (tiled.len() * 10 >= files * 9 && !tiled.is_empty()).then_some(tiled)
}

/// Whether a record that starts at `next` follows one that ended at `end`: right after it,
/// or at the next boundary of a page (4 KiB) or a sector (512 bytes) after it, as a file of
/// page-aligned records (an LMDB-like page file) places them, the padding between them unread.
fn next_record_at(end: u64, next: u64) -> bool {
    next == end || (next > end && [512, 4096].iter().any(|&a| next == end.next_multiple_of(a)))
}

/// The samples of records read one by one through an index: a read is a record, of its own
/// size, in files of `indexed_binary` whose records take the traced sizes' distribution.
fn tiled_samples<'t>(
    data: &DataSet,
    activity: &Activity<'t>,
    intervals: HashMap<u64, Tiling>,
) -> (Samples<'t>, Found) {
    let mut found = Found::default();
    let num_files = data.files.len() as u64;
    let counts: Vec<f64> = intervals.values().map(|t| t.lengths.len() as f64).collect();
    let per_file = (Stats::of(&counts).median.round() as u64).max(1);
    let lengths: Vec<u64> = intervals
        .values()
        .flat_map(|t| t.lengths.iter().copied())
        .collect();
    let headers: Vec<u64> = intervals.values().map(|t| t.start).collect();
    // Each file's records, from their first byte to the end of their last (the padding
    // between records on page boundaries included).
    let spans: HashMap<u64, (i64, i64)> = intervals
        .iter()
        .map(|(&file, t)| (file, (t.start as i64, t.end as i64)))
        .collect();
    let mean = lengths.iter().sum::<u64>() / lengths.len().max(1) as u64;
    let sizes: Vec<f64> = data
        .files
        .iter()
        .map(|f| data.totals.get(f).map_or(0, |t| t.size) as f64)
        .collect();
    // The records' reads; those of the headers before them and the footers after them are
    // not samples.
    let events: Vec<&Rec> = activity
        .reads
        .iter()
        .copied()
        .filter(|r| {
            spans
                .get(&r.file)
                .is_none_or(|&(start, end)| r.offset >= start && r.offset < end)
        })
        .collect();
    let in_data_set = (num_files * per_file).max(1);
    let epochs = ((events.len() as f64 / in_data_set as f64).round() as u64).max(1);
    found.param(
        "dataset.format",
        "indexed_binary".into(),
        "each file's reads tile it, record by record (one positioned read each): \
         indexed_binary reads each sample with one positioned read"
            .into(),
    );
    files_read(
        &mut found,
        data,
        num_files,
        sizes.iter().sum::<f64>() as u64,
    );
    found.param(
        "dataset.num_samples_per_file",
        per_file.to_string(),
        format!(
            "the distinct reads of each file cover it up to its end without overlapping: {}-{} \
             records a file (median {per_file}){}",
            Stats::of(&counts).min as u64,
            Stats::of(&counts).max as u64,
            match headers.iter().max() {
                Some(&h) if h > 0 => format!(
                    ", after a header of up to {h} bytes read apart (not replayed, nor is a \
                     footer after them)"
                ),
                _ => String::new(),
            }
        ),
    );
    found.param(
        "dataset.record_length_bytes",
        mean.to_string(),
        format!("records of {mean} bytes (mean)"),
    );
    if size_bins(lengths.iter().copied()).len() > 1 {
        per_sample_sizes(&mut found, &lengths, "records");
    } else {
        found.param(
            "dataset.record_dims",
            format!("[{mean}]"),
            "every record has one size".into(),
        );
    }
    (
        Samples {
            whole_files: false,
            file_sizes: Stats::of(&sizes),
            num_files,
            shares: size_shares(&activity.reads),
            dominant: mean,
            events,
            in_data_set,
            epochs,
            stream: None,
            unit_rows: 1,
            columnar: None,
            format_reads: true,
            epoch_samples: None,
            draws: None,
            sieve: false,
            windows: false,
            lookup: None,
            patterns: Vec::new(),
            buffered: None,
            ranges: None,
        },
        found,
    )
}

/// The reads of stored chunks, each of its own size, that a program reads again and again (a
/// compressed HDF5 dataset read by batches of scattered rows: each batch reads every chunk
/// its rows fall in, whole, and later batches read them again).
#[derive(Debug)]
struct Chunks<'t> {
    /// The chunks' reads, in time order.
    events: Vec<&'t Rec>,
    /// Chunks read, per data file read.
    places: HashMap<u64, u64>,
    /// The sizes of the reads, one per read.
    sizes: Vec<u64>,
}

/// The chunks behind the data reads, when the reads are not one size (the most frequent size
/// is under half of them), but each place is: the places read twice or more are read at one
/// size each (19 in 20 or more of them), are read [`MIN_CHUNK_REREADS`] times each or more
/// on average and carry nine tenths of the bytes read. Places read once (a library's metadata,
/// cached after its first read; a labels array read whole) are not chunks, nor are samples of
/// one size each followed by its label's read (see [`label_reads`]). `None` otherwise.
fn reread_chunks<'t>(reads: &[&'t Rec]) -> Option<Chunks<'t>> {
    let positioned: Vec<&Rec> = reads.iter().copied().filter(|r| r.offset >= 0).collect();
    let total_bytes: u64 = positioned.iter().map(|r| r.bytes as u64).sum();
    if positioned.len() < 2 * MIN_CHUNK_REREADS as usize || total_bytes == 0 {
        return None;
    }
    let mut sizes_at: HashMap<(u64, u64), HashMap<u64, u64>> = HashMap::new();
    for r in &positioned {
        *sizes_at
            .entry((r.file, r.offset as u64))
            .or_default()
            .entry(r.bytes as u64)
            .or_default() += 1;
    }
    let chunks: HashSet<(u64, u64)> = sizes_at
        .iter()
        .filter(|(_, sizes)| sizes.values().sum::<u64>() >= 2)
        .map(|(&place, _)| place)
        .collect();
    let one_size = chunks.iter().filter(|p| sizes_at[p].len() == 1).count();
    let events: Vec<&Rec> = positioned
        .iter()
        .copied()
        .filter(|r| chunks.contains(&(r.file, r.offset as u64)))
        .collect();
    let sizes: Vec<u64> = events.iter().map(|r| r.bytes as u64).collect();
    let chunk_bytes: u64 = sizes.iter().sum();
    let most_frequent = size_shares(&events).first().map_or(0, |s| s.count);
    let varied = (most_frequent as usize) * 2 < events.len();
    let reread = events.len() as u64 >= MIN_CHUNK_REREADS * chunks.len() as u64;
    let consistent = one_size * 20 >= chunks.len() * 19;
    if chunks.is_empty() || !varied || !reread || !consistent || chunk_bytes * 10 < total_bytes * 9
    {
        return None;
    }
    // Samples of one size each followed by a read of its label (HDF5's labels dataset,
    // sieved from the label on): [`label_reads`] reads those.
    let dominant = size_shares(reads).first().map_or(0, |s| s.size);
    let dominant_reads: Vec<&Rec> = reads
        .iter()
        .copied()
        .filter(|r| r.bytes as u64 == dominant)
        .collect();
    if label_reads(reads, &dominant_reads).is_some() {
        return None;
    }
    let mut places: HashMap<u64, u64> = HashMap::new();
    for &(file, _) in &chunks {
        *places.entry(file).or_default() += 1;
    }
    Some(Chunks {
        events,
        places,
        sizes,
    })
}

/// The fewest reads a chunk has on average for [`reread_chunks`] to take the reads for chunks:
/// two epochs of a scan read each chunk twice.
const MIN_CHUNK_REREADS: u64 = 2;

/// The samples of stored chunks read again and again: a sample is a chunk, in files of
/// `indexed_binary` whose records take the sizes of the reads (read by read, so that the
/// replay's reads move the bytes the program's did, chunks read more often weighing more);
/// as many epochs as make the program's steps, each reading the data set's whole batches.
fn chunk_samples<'t>(
    data: &DataSet,
    activity: &Activity<'t>,
    chunks: Chunks<'t>,
) -> (Samples<'t>, Found) {
    let mut found = Found::default();
    let num_files = data.files.len() as u64;
    let counts: Vec<f64> = chunks.places.values().map(|&n| n as f64).collect();
    let reads = chunks.events.len() as u64;
    // Worker processes started again for each epoch (a DataLoader's, not persistent): their
    // generations are the epochs, each reading the chunks again as often as its share of the
    // reads says, which dlio's epoch (one pass over its data set) replays as a data set of
    // that many samples.
    let generations = generation_starts(&chunks.events).len() as u64;
    let by_generation = activity.consumer.is_some() && generations >= 2;
    let per_file = if by_generation {
        (reads / generations).div_ceil(num_files.max(1)).max(1)
    } else {
        (Stats::of(&counts).mean.round() as u64).max(1)
    };
    let in_data_set = (num_files * per_file).max(1);
    let mean = chunks.sizes.iter().sum::<u64>() / reads.max(1);
    let sizes: Vec<f64> = data
        .files
        .iter()
        .map(|f| data.totals.get(f).map_or(0, |t| t.size) as f64)
        .collect();
    // The steps decide the epochs: dlio reads whole batches of an epoch's samples, so a data
    // set of n chunks read b a step makes n / b steps an epoch (rounded down); the program's
    // steps take as many epochs as hold them, each cut to its share of the steps
    // (`train.total_training_steps`) when they are not a whole number of epochs. Without
    // steps, the passes over the chunks.
    let steps = (activity.paused && activity.consumer.is_none() && !activity.bursts.is_empty())
        .then(|| {
            let mut per_burst: Vec<u64> = vec![0; activity.bursts.len()];
            for r in &chunks.events {
                per_burst[burst_of(&activity.bursts, r.start)] += 1;
            }
            let batch = super::readers::typical_count(&per_burst).min(in_data_set);
            (activity.bursts.len() as u64, batch.max(1))
        });
    let (epochs, epoch_samples, replay_reads, how) = match steps {
        Some((steps, batch)) => {
            let (epochs, per_epoch, capped) = epochs_for_steps(steps, in_data_set / batch);
            (
                epochs,
                capped.then_some(per_epoch * batch),
                epochs * per_epoch * batch,
                format!(
                    "{steps} steps of {batch} chunk reads (most often, or the mean), {} steps an \
                     epoch of {in_data_set} chunks{}",
                    in_data_set / batch,
                    if capped {
                        format!(", cut to {per_epoch}")
                    } else {
                        String::new()
                    }
                ),
            )
        }
        None if by_generation => (
            generations,
            None,
            generations * in_data_set,
            format!(
                "{reads} chunk reads by {generations} generations of worker processes, \
                 {in_data_set} a generation ({} chunks, each read again within it)",
                chunks.places.values().sum::<u64>()
            ),
        ),
        None => {
            let epochs = ((reads as f64 / in_data_set as f64).round() as u64).max(1);
            (
                epochs,
                None,
                epochs * in_data_set,
                format!("{reads} chunk reads over {in_data_set} chunks"),
            )
        }
    };
    // A whole batch stands for a step's chunk reads, 22.4 on average read as 22: each chunk of
    // the replay carries the bytes of the reads it stands for (up to a tenth more or less), so
    // that the steps move the program's bytes.
    let carried = reads as f64 / replay_reads.max(1) as f64;
    let carried = if (0.9..=1.1).contains(&carried) {
        carried
    } else {
        1.0
    };
    let sizes_read: Vec<u64> = chunks
        .sizes
        .iter()
        .map(|&s| (s as f64 * carried).round() as u64)
        .collect();
    let mean = (mean as f64 * carried).round() as u64;
    found.param(
        "dataset.format",
        "indexed_binary".into(),
        format!(
            "the data reads are of many sizes, each at a place of its own that is always read at \
             its size, and read again and again ({reads} reads of {} places): stored chunks \
             of their own sizes (compressed), each read whole; indexed_binary reads each sample \
             with one positioned read",
            chunks.places.values().sum::<u64>()
        ),
    );
    files_read(
        &mut found,
        data,
        num_files,
        sizes.iter().sum::<f64>() as u64,
    );
    found.param(
        "dataset.num_samples_per_file",
        per_file.to_string(),
        format!(
            "{} chunks read in {} files: a sample is a chunk{}",
            chunks.places.values().sum::<u64>(),
            chunks.places.len(),
            if by_generation {
                format!(
                    ", and a file holds the reads of a generation of worker processes, \
                     {per_file} (the replay's file is larger than the program's, its bytes \
                     read as often)"
                )
            } else {
                String::new()
            }
        ),
    );
    found.param(
        "dataset.record_length_bytes",
        mean.to_string(),
        if carried == 1.0 {
            format!("chunk reads of {mean} bytes (mean)")
        } else {
            format!(
                "chunk reads of {mean} bytes (mean), each {:.1}% {} than the program's: the \
                 replay's {replay_reads} reads carry the bytes of its {reads}",
                (carried - 1.0).abs() * 100.0,
                if carried > 1.0 { "larger" } else { "smaller" }
            )
        },
    );
    per_sample_sizes(
        &mut found,
        &sizes_read,
        "chunk reads (each read, so the chunks read more often weigh more)",
    );
    found.note(format!(
        "{epochs} epochs: {how}; the replay reads chunks uniformly, the program may favour some \
         (a curriculum's first ones)"
    ));
    (
        Samples {
            whole_files: false,
            file_sizes: Stats::of(&sizes),
            num_files,
            shares: size_shares(&chunks.events),
            dominant: mean,
            events: chunks.events,
            in_data_set,
            epochs,
            stream: None,
            unit_rows: 1,
            columnar: None,
            format_reads: true,
            epoch_samples,
            draws: None,
            sieve: false,
            windows: false,
            lookup: None,
            patterns: Vec::new(),
            buffered: None,
            ranges: None,
        },
        found,
    )
}

/// Epochs of at most `per_epoch` steps (at least one) that make `steps` steps: as many as hold
/// them, and the steps each takes, all the same; and whether that cuts the epochs short.
fn epochs_for_steps(steps: u64, per_epoch: u64) -> (u64, u64, bool) {
    let per_epoch = per_epoch.max(1);
    let epochs = steps.div_ceil(per_epoch).max(1);
    let each = ((steps as f64 / epochs as f64).round() as u64).clamp(1, per_epoch);
    (epochs, each, each < per_epoch)
}

/// The samples of columnar files read by row group: rows, with the files' own columns, those
/// read marked; a visit of a row group stands for its rows.
fn columnar_samples<'t>(
    data: &DataSet,
    activity: &Activity<'t>,
    columnar: Columnar,
    visits: Vec<&'t Rec>,
    format_evidence: String,
) -> (Samples<'t>, Found) {
    let mut found = Found::default();
    let num_files = data.files.len() as u64;
    let sizes: Vec<f64> = data
        .files
        .iter()
        .map(|f| data.totals.get(f).map_or(0, |t| t.size) as f64)
        .collect();
    let in_data_set = (num_files * columnar.file_rows).max(1);
    let visits_per_epoch = (num_files * columnar.file_rows.div_ceil(columnar.group_rows)).max(1);
    let epochs = ((visits.len() as f64 / visits_per_epoch as f64).round() as u64).max(1);
    let row_bytes: u64 = columnar
        .columns
        .iter()
        .filter(|c| c.read)
        .map(|c| match c.dtype.as_str() {
            "string" => 8,
            "binary" => c.size,
            "bool" | "int8" | "uint8" => c.size,
            "int16" | "uint16" | "float16" => 2 * c.size,
            "int64" | "uint64" | "float64" => 8 * c.size,
            _ => 4 * c.size,
        })
        .sum();
    found.param("dataset.format", "parquet".into(), format_evidence);
    files_read(
        &mut found,
        data,
        num_files,
        sizes.iter().sum::<f64>() as u64,
    );
    found.param(
        "dataset.num_samples_per_file",
        columnar.file_rows.to_string(),
        "a sample is a row: the files' footers say how many each holds".into(),
    );
    found.param(
        "dataset.record_length_bytes",
        row_bytes.max(1).to_string(),
        "the bytes of a row's read columns".into(),
    );
    let columns = columnar
        .columns
        .iter()
        .map(|c| {
            format!(
                "{{name: {}, dtype: {}, size: {}, read: {}}}",
                super::output::yaml_string(&c.name),
                c.dtype,
                c.size,
                if c.read { "True" } else { "False" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    found.param(
        "dataset.parquet",
        format!(
            "{{row_group_size: {}, footer_read_size: {}, metadata_cache: {}, {}columns: [{columns}]}}",
            columnar.group_rows,
            columnar.footer_read_size,
            if columnar.metadata_cache { "True" } else { "False" },
            if columnar.coalesce_row_groups > 1 {
                format!("coalesce_row_groups: {}, ", columnar.coalesce_row_groups)
            } else {
                String::new()
            }
        ),
        format!(
            "the footers: row groups of {} rows; the traced reads cover the chunks of {} of {} \
             columns (read: False for the others); {}; {}",
            columnar.group_rows,
            columnar.columns.iter().filter(|c| c.read).count(),
            columnar.columns.len(),
            if columnar.footer_read_size > 0 {
                format!(
                    "each footer is read as the file's last {} bytes in one request",
                    columnar.footer_read_size
                )
            } else {
                "footers are read as parquet-rs reads them".into()
            },
            if columnar.metadata_cache {
                "each file is opened and its footer read once for the whole run"
            } else {
                "footers are read again every epoch"
            }
        ) + &if columnar.coalesce_row_groups > 1 {
            format!(
                "; a read takes {} row groups at once (the median read): fetched together",
                columnar.coalesce_row_groups
            )
        } else {
            String::new()
        },
    );
    // The library's parse of each footer before it reads the data: spent at every opening,
    // so only where footers are read at every opening too.
    if !columnar.metadata_cache && columnar.footer_work_s >= MIN_OPEN_WORK_S {
        found.param(
            "reader.open_time",
            format!("{:.6}", columnar.footer_work_s),
            format!(
                "{:.3} ms (median) from a footer's read to the file's next read: the library \
                 parses the metadata before it reads the data",
                columnar.footer_work_s * 1e3
            ),
        );
    }
    let unit_rows = columnar.group_rows;
    (
        Samples {
            whole_files: false,
            file_sizes: Stats::of(&sizes),
            num_files,
            shares: size_shares(&activity.reads),
            dominant: 0,
            events: visits,
            in_data_set,
            epochs,
            stream: None,
            unit_rows,
            columnar: Some(columnar),
            format_reads: true,
            epoch_samples: None,
            draws: None,
            sieve: false,
            windows: false,
            lookup: None,
            patterns: Vec::new(),
            buffered: None,
            ranges: None,
        },
        found,
    )
}

/// Whether a sample is a whole file: each opening's reads stay within one burst (in nine files
/// of ten), or no pauses separate the steps at all.
fn whole_files_read(data: &DataSet, activity: &Activity) -> bool {
    let Activity {
        reads,
        opens,
        bursts,
        paused,
        ..
    } = activity;
    let paused = *paused;
    // Samples: whole files when every opening's reads stay within one burst.
    let mut bursts_per_file: HashMap<u64, HashSet<usize>> = HashMap::new();
    for r in reads.iter() {
        bursts_per_file
            .entry(r.file)
            .or_default()
            .insert(burst_of(bursts, r.start));
    }
    let within_one = data
        .files
        .iter()
        .filter(|f| {
            let touched = bursts_per_file.get(f).map_or(0, HashSet::len) as u64;
            let opened = data.totals.get(f).map_or(0, |t| t.opens);
            touched <= opened.max(1)
        })
        .count();
    let whole_files = !paused || within_one * 10 >= data.files.len() * 9;
    whole_files && !opens.is_empty()
}

/// `reader.read_type: memory` when slices are read from files kept open across samples.
pub(super) fn read_type(activity: &Activity, samples: &Samples) -> Found {
    let mut found = Found::default();
    let (opens, events) = (activity.opens.len() as u64, samples.events.len() as u64);
    if !samples.whole_files && opens * 2 < events {
        found.param(
            "reader.read_type",
            "memory".into(),
            format!(
                "{opens} openings of data files for {events} slice reads: files stay open across \
                 samples"
            ),
        );
    }
    found
}

/// The format a data file's extension (and, when it is still there, its first bytes) says.
fn format_of(extension: &str, sample: Option<&str>, whole_files: bool) -> (&'static str, String) {
    let magic = sample.and_then(|p| {
        let mut head = [0u8; 16];
        use std::io::Read;
        let n = std::fs::File::open(p)
            .and_then(|mut f| f.read(&mut head))
            .ok()?;
        Some(head[..n].to_vec())
    });
    let by_magic = magic
        .as_deref()
        .and_then(dlio_format::format_by_magic)
        .map(|d| d.kind.name());
    let by_name = dlio_format::format_by_extension(extension).map(|d| d.kind.name());
    let seen = match (&magic, by_magic) {
        (Some(_), Some(f)) => format!("the files' first bytes are {f}'s"),
        (Some(_), None) => "the files' first bytes match no known format".to_string(),
        (None, _) => "the files are no longer there to look inside".to_string(),
    };
    let known = by_magic.or(by_name);
    if let Some(f) = known.filter(|f| !sized_by_its_values(f)) {
        return (f, format!("extension .{extension}; {seen}"));
    }
    // Raw bytes, or text (csv: dlio writes the values it draws as text, so its files' size
    // follows the values and cannot be made the traced size) stood in for by raw bytes of the
    // same size. Read whole, npy's reader (which reads every byte without decoding under
    // MLPerf's semantics) moves the same bytes; read in slices, indexed_binary reads each
    // sample with one positioned read.
    let what = match known {
        Some(f) => format!(
            "extension .{extension} ({f}; {seen}): dlio's {f} files hold the values it draws as \
             text, whose size it cannot match, so the traced files are"
        ),
        None => format!("extension .{extension} and {seen}: raw bytes"),
    };
    if whole_files {
        (
            "npy",
            format!(
                "{what} read whole, emulated by npy files of the same size (128 bytes of \
                 header, the rest data)"
            ),
        )
    } else {
        (
            "indexed_binary",
            format!(
                "{what} read in slices, emulated by indexed_binary (one positioned read per \
                 sample)"
            ),
        )
    }
}

/// Whether dlio's generated files of format `name` have a size that follows the values drawn
/// rather than the layout (text: csv), so that no layout gives a traced file's size. Images
/// (whose size is found by encoding) and the columnar formats (sized by their own rules) are
/// not.
fn sized_by_its_values(name: &str) -> bool {
    dlio_format::FORMATS
        .iter()
        .find(|d| d.kind.name() == name)
        .is_some_and(|d| {
            !d.stores_samples_as_they_are
                && dlio_format::generated_image_bytes(d.kind, 64).is_none()
                && !matches!(name, "parquet" | "arrow" | "synthetic")
                && dlio_format::format_for(d.kind)
                    .ok()
                    .and_then(|f| {
                        f.expected_size(&dlio_format::FileLayout {
                            samples: 1,
                            sample_dims: vec![64],
                            element: dlio_config::ElementType::Uint8,
                            compression: dlio_config::Compression::None,
                            fixed_size: false,
                        })
                    })
                    .is_none()
        })
}

/// Whether `format`'s record is a pixel count whose bytes are found by encoding (jpeg, png).
pub(super) fn is_image_format(format: &str) -> bool {
    dlio_format::FORMATS
        .iter()
        .find(|d| d.kind.name() == format)
        .is_some_and(|d| dlio_format::generated_image_bytes(d.kind, 64).is_some())
}

/// The sample bytes (`record_length_bytes`, or pixels for images) that make dlio generate a
/// file of `file_bytes` holding `samples` samples in `format`: the format's own file size for
/// a layout (its headers and framing), inverted; for images, the pixel count whose encoded
/// noise image has that size (the encoder's ratio varies slowly with the size, so a few
/// corrections find it).
pub(super) fn sample_bytes_for_file(format: &str, file_bytes: u64, samples: u64) -> u64 {
    let n = samples.max(1);
    let plain = (file_bytes / n).max(1);
    let Some(kind) = dlio_format::FORMATS
        .iter()
        .find(|d| d.kind.name() == format)
        .map(|d| d.kind)
    else {
        return plain;
    };
    if dlio_format::generated_image_bytes(kind, 64).is_some() {
        let mut pixels = plain;
        for _ in 0..3 {
            let Some(bytes) = dlio_format::generated_image_bytes(kind, pixels).filter(|&b| b > 0)
            else {
                break;
            };
            pixels = ((pixels as f64 * plain as f64 / bytes as f64).round() as u64).max(1);
        }
        return pixels;
    }
    let Ok(dlio) = dlio_format::format_for(kind) else {
        return plain;
    };
    let expected = |sample: u64| {
        dlio.expected_size(&dlio_format::FileLayout {
            samples: u32::try_from(n).unwrap_or(u32::MAX),
            sample_dims: vec![usize::try_from(sample).unwrap_or(usize::MAX)],
            element: dlio_config::ElementType::Uint8,
            compression: dlio_config::Compression::None,
            fixed_size: false,
        })
    };
    let mut sample = plain;
    for _ in 0..4 {
        let Some(size) = expected(sample) else {
            return plain;
        };
        let short = file_bytes as i128 - size as i128;
        if short.abs() < n as i128 {
            break;
        }
        sample = (sample as i128 + short / n as i128).max(1) as u64;
    }
    sample
}

/// What the evidence says of how sample bytes were made from file sizes.
fn size_note(format: &str) -> String {
    match format {
        "jpeg" | "png" => format!(
            ", as the pixels whose noise image dlio's {format} encoder writes in a file of that \
             size"
        ),
        _ => format!(
            ", less what dlio's {format} files hold besides the samples (headers, framing), so \
             that the generated files have this size"
        ),
    }
}

/// `dataset.record_length_bytes_distribution` from `sizes` (the `what` of each sample: records,
/// windows) and `record_length_bytes_per: sample`: each sample of its own size in its file.
fn per_sample_sizes(found: &mut Found, sizes: &[u64], what: &str) {
    found.param(
        "dataset.record_length_bytes_distribution",
        size_bins(sizes.iter().copied())
            .iter()
            .map(|s| format!("{{size: {}, weight: {}}}", s.size, s.count))
            .collect::<Vec<_>>()
            .join(", "),
        format!(
            "the {what} range from {} to {} bytes",
            sizes.iter().min().copied().unwrap_or(0),
            sizes.iter().max().copied().unwrap_or(0)
        ),
    );
    found.param(
        "dataset.record_length_bytes_per",
        "sample".into(),
        format!("each of the {what} has its own size inside its file"),
    );
}

/// Sizes in at most [`MAX_SIZES`](super::MAX_SIZES) equal-count bins, each at its sizes' mean
/// (every size as it is when there are no more than that): the total of the sizes is kept,
/// and their shape (lognormal, bimodal) to one bin's resolution.
fn size_bins(sizes: impl Iterator<Item = u64>) -> Vec<SizeShare> {
    let mut sorted: Vec<u64> = sizes.collect();
    sorted.sort_unstable();
    let mut distinct: Vec<SizeShare> = Vec::new();
    for &s in &sorted {
        match distinct.last_mut() {
            Some(last) if last.size == s => last.count += 1,
            _ => distinct.push(SizeShare { size: s, count: 1 }),
        }
    }
    if distinct.len() <= super::MAX_SIZES {
        return distinct;
    }
    let n = sorted.len();
    let bins = super::MAX_SIZES;
    (0..bins)
        .map(|b| {
            let part = &sorted[b * n / bins..(b + 1) * n / bins];
            SizeShare {
                size: (part.iter().map(|&s| u128::from(s)).sum::<u128>()
                    / part.len().max(1) as u128) as u64,
                count: part.len() as u64,
            }
        })
        .filter(|s| s.count > 0)
        .collect()
}

/// `dataset.num_files_train`: the `num_files` files of the data set's kind read, `bytes` in all.
fn files_read(found: &mut Found, data: &DataSet, num_files: u64, bytes: u64) {
    found.param(
        "dataset.num_files_train",
        num_files.to_string(),
        format!(
            "{num_files} files of .{} under {} were read ({bytes} bytes in all)",
            data.extension, data.dir
        ),
    );
}

/// The epochs of `read` samples of a data set of `data_set`, and whether each reads only its
/// share of the data set: the nearest whole number of passes, unless that misses the samples
/// read by more than [`SHARED_EPOCHS_MISS`] of them (chunks of random windows, 423 reads of
/// 128 chunks: three epochs would read 9% fewer bytes than the program); then as many epochs
/// as hold them, each reading its share (`train.total_training_steps` caps it).
fn whole_or_shared_epochs(read: u64, data_set: u64) -> (u64, bool) {
    let data_set = data_set.max(1);
    let passes = read as f64 / data_set as f64;
    let nearest = passes.round().max(1.0);
    let missed = (passes - nearest).abs() * data_set as f64;
    if read > data_set && missed > SHARED_EPOCHS_MISS * read as f64 {
        (read.div_ceil(data_set), true)
    } else {
        (nearest as u64, false)
    }
}

/// The share of the samples read that whole epochs may miss (the bound on the data bytes
/// `dlio fidelity` holds a replay to).
const SHARED_EPOCHS_MISS: f64 = 0.02;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fractional_number_of_passes_shares_its_reads_over_whole_epochs() {
        // 423 chunk reads of 128 chunks: four epochs of their share, not three of 128.
        assert_eq!(super::whole_or_shared_epochs(423, 128), (4, true));
        // 1,199 reads of 600 samples: two epochs, one sample lost to the trace.
        assert_eq!(super::whole_or_shared_epochs(1199, 600), (2, false));
        // Fewer reads than the data set: one epoch of what was read.
        assert_eq!(super::whole_or_shared_epochs(100, 128), (1, false));
    }

    #[test]
    fn a_small_read_apart_from_the_window_before_it_is_a_lookup() {
        // MDS: 8 bytes of the offset table at the head, then the sample far into the shard.
        let mds: Vec<Vec<(u64, u64)>> = (0..10u64)
            .map(|i| vec![(4 + 4 * i, 12 + 4 * i), (9000 * i + 500, 9000 * i + 9200)])
            .collect();
        let of =
            |o: &[Vec<(u64, u64)>]| lookup_of(&o.iter().map(Vec::as_slice).collect::<Vec<_>>());
        assert_eq!(of(&mds), Some(8));
        // A header read the window continues from is the window's start, not a lookup.
        let contiguous: Vec<Vec<(u64, u64)>> =
            (0..10u64).map(|_| vec![(0, 128), (128, 40_000)]).collect();
        assert_eq!(of(&contiguous), None);
        // Windows read in one request: nothing to look up.
        let single: Vec<Vec<(u64, u64)>> =
            (0..10u64).map(|i| vec![(i * 100, i * 100 + 90)]).collect();
        assert_eq!(of(&single), None);
        // A header, then the index at the tail, then frames: the window's own requests.
        let video: Vec<Vec<(u64, u64)>> = (0..10u64)
            .map(|i| vec![(0, 64), (500_000, 501_280), (1_000 + i, 6_000 + i)])
            .collect();
        assert_eq!(of(&video), None);
        // A first read larger than a page is part of the sample (a video's index and frames).
        let large: Vec<Vec<(u64, u64)>> = (0..10u64)
            .map(|i| vec![(0, 65_536), (1_000_000 + i, 2_000_000 + i)])
            .collect();
        assert_eq!(of(&large), None);
        // Made by fewer than 80% of the openings: not the loader's rule.
        let mut some = mds.clone();
        for o in some.iter_mut().take(3) {
            o.remove(0);
        }
        assert_eq!(of(&some), None);
    }

    #[test]
    fn only_text_formats_are_sized_by_their_values() {
        assert!(sized_by_its_values("csv"));
        for exact in [
            "npy",
            "npz",
            "tfrecord",
            "png",
            "jpeg",
            "parquet",
            "indexed_binary",
        ] {
            assert!(!sized_by_its_values(exact), "{exact}");
        }
        // A csv read whole or in slices is emulated by raw bytes of its size.
        assert_eq!(format_of("csv", None, true).0, "npy");
        assert_eq!(format_of("csv", None, false).0, "indexed_binary");
        assert_eq!(format_of("npy", None, true).0, "npy");
    }

    fn partial(requests: Vec<PatternStep>) -> CommonPattern {
        CommonPattern {
            work_s: vec![0.0; requests.len()],
            requests,
            read_rest: false,
            count: 10,
            share: 0.5,
            first_unqueued_s: None,
        }
    }

    #[test]
    fn openings_that_each_read_one_part_of_a_file_make_a_sample_of_each_part() {
        // An npz of 98,794 bytes: the directory at the end, then one of two arrays.
        let size = 98_794;
        let directory = [(true, 22, 22), (true, 124, 124)];
        let first = partial([&directory[..], &[(false, 0, 49_152)]].concat());
        let second = partial([&directory[..], &[(false, 49_335, 49_459)]].concat());
        assert_eq!(
            members_read_apart(&[first.clone(), second.clone()], size),
            Some(2)
        );
        // One kind only, kinds that read the rest, or kinds that leave a tenth of the file
        // unread: not parts of one file.
        assert_eq!(members_read_apart(std::slice::from_ref(&first), size), None);
        let mut whole = second.clone();
        whole.read_rest = true;
        assert_eq!(members_read_apart(&[first.clone(), whole], size), None);
        let short = partial([&directory[..], &[(false, 49_335, 30_000)]].concat());
        assert_eq!(members_read_apart(&[first.clone(), short], size), None);
        // A kind that reads most of the file by itself is not a part.
        let most = partial(vec![(false, 0, 90_000)]);
        assert_eq!(members_read_apart(&[most, second], size), None);
    }

    fn openings(files: &[u64]) -> Vec<Rec> {
        files
            .iter()
            .enumerate()
            .map(|(i, &file)| Rec {
                rank: 1,
                tid: 1,
                start: i as i64 * 1000,
                end: i as i64 * 1000 + 10,
                layer: 0,
                op: 0,
                item: false,
                fd: 5,
                file,
                offset: 0,
                bytes: 100,
                buf_page_offset: -1,
                untouched_pages: -1,
            })
            .collect()
    }

    /// A small generator for the test's draws (SplitMix64), so the test needs no crate.
    fn draws(n: u64, count: usize, mut state: u64) -> Vec<u64> {
        (0..count)
            .map(|_| {
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                ((u128::from(z ^ (z >> 31)) * u128::from(n)) >> 64) as u64
            })
            .collect()
    }

    #[test]
    fn draws_are_split_into_epochs_of_whole_steps_nearest_those_counted() {
        // 46 steps, at most 6 an epoch (32 samples, batches of 5), near 8 epochs: 23 of 2.
        assert_eq!(epochs_dividing(46, 6, 8), Some(23));
        // 48 steps: 8 epochs of 6 as counted.
        assert_eq!(epochs_dividing(48, 6, 8), Some(8));
        // A tie (7 and 9 are as near 8 for 63 steps) takes the fewer epochs.
        assert_eq!(epochs_dividing(63, 9, 8), Some(7));
        // A prime number of steps: one step an epoch.
        assert_eq!(epochs_dividing(47, 6, 8), Some(47));
        // None when no epoch could hold its steps.
        assert_eq!(epochs_dividing(5, 0, 1), None);
    }

    #[test]
    fn draws_with_replacement_are_told_from_epochs_of_a_permutation() {
        // Two epochs of 96 uniform draws from 100 files: found, sized near 100, 2 epochs.
        let drawn = openings(&draws(100, 192, 7));
        let refs: Vec<&Rec> = drawn.iter().collect();
        let d = drawn_with_replacement(&refs, 1).expect("draws with replacement");
        assert!((85..=118).contains(&d.data_set), "{}", d.data_set);
        assert_eq!(d.epochs, 2);
        // Two epochs and a half of a permutation (a step cap cut the third): not draws.
        let mut epochs: Vec<u64> = (0..100).rev().collect();
        epochs.extend((0..100).map(|i| (i * 37) % 100));
        epochs.extend(0..50);
        let permuted = openings(&epochs);
        let refs: Vec<&Rec> = permuted.iter().collect();
        assert!(drawn_with_replacement(&refs, 1).is_none());
        // Every file opened twice in a row (a header read, then the data), in shuffled
        // epochs: not draws either.
        let twice: Vec<u64> = epochs.iter().flat_map(|&f| [f, f]).collect();
        let twice = openings(&twice);
        let refs: Vec<&Rec> = twice.iter().collect();
        assert!(drawn_with_replacement(&refs, 1).is_none());
    }

    #[test]
    fn the_population_is_what_uniform_draws_need_to_find_the_distinct_ones() {
        // 100 files, 192 draws: 100 (1 - 0.99^192) = 85.5 distinct on average.
        let n = population_of(85, 192);
        assert!((98..=102).contains(&n), "{n}");
        // Every draw distinct: no repeat says nothing, so the search stops at its top.
        assert_eq!(population_of(10, 10), 640);
        // Never fewer than the distinct ones.
        assert!(population_of(50, 51) >= 50);
    }

    #[test]
    fn generations_group_the_processes_that_read_at_the_same_time() {
        // Processes 1, 2 and 3 read together (begun 0, 10 and 21 ms in), then 4 and 5 after
        // every one of them stopped.
        let ms = 1_000_000;
        let read = |rank: u32, start: i64, end: i64| Rec {
            rank,
            start: start * ms,
            end: end * ms,
            ..openings(&[0])[0]
        };
        let reads = [
            read(1, 0, 100),
            read(2, 10, 120),
            read(3, 21, 90),
            read(1, 50, 60),
            read(4, 130, 200),
            read(5, 138, 210),
        ];
        let refs: Vec<&Rec> = reads.iter().collect();
        assert_eq!(
            generations(&refs),
            vec![vec![0, 10 * ms, 21 * ms], vec![130 * ms, 138 * ms]]
        );
        assert_eq!(generation_starts(&refs), vec![0, 130 * ms]);
    }
}

/// Sieve windows and tiled records, from reads made up for the purpose.
#[cfg(test)]
mod layout_tests {
    use super::*;
    use crate::event::Op;

    /// The activity of `calls` on `files` files of `size` bytes, in steps that start at
    /// each call index of `step_starts` (1 us a call), paused between them.
    fn stepped<'t>(
        calls: &'t [Rec],
        files: u64,
        size: u64,
        step_starts: &[i64],
    ) -> (super::super::Activity<'t>, DataSet) {
        let data = DataSet {
            dir: "/data".into(),
            files: (0..files).collect(),
            totals: (0..files)
                .map(|f| {
                    let totals = super::super::trace_view::FileTotals {
                        size,
                        ..Default::default()
                    };
                    (f, totals)
                })
                .collect(),
            extension: "vol".into(),
            subfolders: 0,
        };
        let refs: Vec<&Rec> = calls.iter().collect();
        let bursts = step_starts
            .iter()
            .zip(step_starts.iter().skip(1).chain([&i64::MAX]))
            .map(|(&start, &next)| super::super::Burst {
                start: start * 1000,
                end: next.saturating_mul(1000).min(i64::MAX - 1),
                busy: 0,
            })
            .collect();
        let activity = super::super::Activity {
            reads: refs.iter().copied().filter(|r| r.bytes > 0).collect(),
            opens: refs
                .iter()
                .copied()
                .filter(|r| r.op == Op::Open as u8)
                .collect(),
            calls: refs,
            window: (0, calls.last().map_or(0, |c| c.end)),
            bursts,
            paused: true,
            consumer: None,
            preload: false,
            run_end: calls.last().map_or(0, |c| c.end),
            scan: None,
            written: Vec::new(),
        };
        (activity, data)
    }

    /// Three steps of four files of 1 MiB each; `openings` openings read each file, a
    /// share of it each, on threads of their own.
    fn ranged_steps(openings: i64, share: f64) -> (Vec<Rec>, Vec<i64>) {
        let (mut calls, mut starts) = (Vec::new(), Vec::new());
        let mut i = 0;
        for step in 0..3u64 {
            starts.push(i);
            for f in step * 4..step * 4 + 4 {
                for k in 0..openings {
                    let mut open = super::super::test_call(i, Op::Open, f, -1, 0);
                    let range = ((1 << 20) as f64 * share) as i64;
                    let mut read = super::super::test_call(i + 1, Op::Read, f, k * range, range);
                    open.tid = k as u32;
                    read.tid = k as u32;
                    calls.extend([open, read]);
                    i += 2;
                }
            }
            i += 100;
        }
        (calls, starts)
    }

    #[test]
    fn files_read_whole_in_a_step_by_an_opening_a_range_are_ranged_files() {
        let (calls, starts) = ranged_steps(4, 0.25);
        let (activity, data) = stepped(&calls, 12, 1 << 20, &starts);
        let ranged = ranged_files(&data, &activity).expect("ranged");
        assert_eq!(ranged.firsts.len(), 12);
        assert_eq!(ranged.range, 262_144);
        assert_eq!(ranged.openings_per_file, 4.0);
        // One opening a file, a window of a quarter each: crops, not ranges.
        let (calls, starts) = ranged_steps(1, 0.25);
        let (activity, data) = stepped(&calls, 12, 1 << 20, &starts);
        assert!(ranged_files(&data, &activity).is_none());
        // Two openings each reading the whole file (a header check, then the load): not
        // ranges of it.
        let (calls, starts) = ranged_steps(2, 0.5);
        let mut calls = calls;
        for c in calls.iter_mut().filter(|c| c.bytes > 0) {
            (c.offset, c.bytes) = (0, 1 << 20);
        }
        let (activity, data) = stepped(&calls, 12, 1 << 20, &starts);
        assert!(ranged_files(&data, &activity).is_none());
    }

    fn read(i: i64, offset: i64, bytes: i64) -> Rec {
        super::super::test_call(i, Op::Read, 1, offset, bytes)
    }

    /// `total` rows of 3072 bytes from 2048, windows of 64 KiB.
    fn windows(total: i64, rows: impl Iterator<Item = i64>) -> Vec<Rec> {
        let (base, row, end) = (2048, 3072, 2048 + total * 3072);
        rows.enumerate()
            .map(|(i, r)| {
                let offset = base + r * row;
                read(i as i64, offset, (end - offset).min(65536))
            })
            .collect()
    }

    /// 40 chunks of their own sizes, 10 000 bytes apart from 4096, each read `times` times in
    /// a scattered order, after 5 metadata reads read once.
    fn chunk_reads(times: i64, size_of: impl Fn(i64) -> i64) -> Vec<Rec> {
        let mut reads: Vec<Rec> = (0..5).map(|i| read(i, i * 512, 96 + i)).collect();
        for k in 0..40 * times {
            let chunk = (k * 17) % 40;
            reads.push(read(10 + k, 4096 + chunk * 10_000, size_of(chunk)));
        }
        reads
    }

    #[test]
    fn places_read_again_and_again_at_sizes_of_their_own_are_chunks() {
        let reads = chunk_reads(6, |chunk| 6_000 + chunk * 97);
        let refs: Vec<&Rec> = reads.iter().collect();
        let chunks = reread_chunks(&refs).expect("chunks");
        assert_eq!(chunks.places.get(&1), Some(&40));
        // Every chunk read, and not the metadata read once.
        assert_eq!(chunks.events.len(), 240);
        assert!(chunks.sizes.iter().all(|&s| s >= 6_000));
        // One size for every place: slices of a kind the other rules read.
        let same = chunk_reads(6, |_| 8192);
        assert!(reread_chunks(&same.iter().collect::<Vec<_>>()).is_none());
        // Two epochs of a scan read each chunk twice; once each is not reading again.
        let twice = chunk_reads(2, |chunk| 6_000 + chunk * 97);
        assert!(reread_chunks(&twice.iter().collect::<Vec<_>>()).is_some());
        let once = chunk_reads(1, |chunk| 6_000 + chunk * 97);
        assert!(reread_chunks(&once.iter().collect::<Vec<_>>()).is_none());
        // Images of one size, each followed by its label read to the labels' end (h5py's
        // sieve), two epochs: samples and their labels, not chunks.
        let mut labelled = Vec::new();
        for k in 0..320i64 {
            let i = (k * 37) % 160;
            labelled.push(read(2 * k, 4096 + i * 12_288, 12_288));
            labelled.push(read(2 * k + 1, 2_000_000 + i * 8, (160 - i) * 8));
        }
        // The chunk index's nodes, read in both epochs: the images' size is under half the
        // reads.
        for node in 0..16 {
            labelled.push(read(10_000 + node, 3_000_000 + (node % 8) * 4096, 3656));
        }
        assert!(size_shares(&labelled.iter().collect::<Vec<_>>())[0].count * 2 < 656);
        assert!(reread_chunks(&labelled.iter().collect::<Vec<_>>()).is_none());
        // A place read at other sizes each time (a stream's reads from where it stopped).
        let mut varying = chunk_reads(6, |chunk| 6_000 + chunk * 97);
        for (i, r) in varying.iter_mut().enumerate() {
            r.bytes += (i % 3) as i64;
        }
        assert!(reread_chunks(&varying.iter().collect::<Vec<_>>()).is_none());
    }

    #[test]
    fn chunks_read_by_generations_of_workers_make_an_epoch_each() {
        // Two generations of two worker processes each (a DataLoader's, forked again for
        // the second epoch), each generation reading every one of 40 chunks 3 times.
        let mut calls = Vec::new();
        for generation in 0..2i64 {
            for k in 0..120i64 {
                let chunk = (k * 17) % 40;
                let mut r = read(
                    generation * 10_000 + k,
                    4096 + chunk * 10_000,
                    6_000 + chunk * 97,
                );
                r.rank = (10 + 2 * generation + k % 2) as u32;
                calls.push(r);
            }
        }
        let (mut activity, data) = stepped(&calls, 1, 500_000, &[0]);
        activity.paused = false;
        activity.consumer = Some(super::super::Consumer {
            pid: 1,
            takes: Vec::new(),
            reads: Vec::new(),
            puts: Vec::new(),
            ranks: 1,
        });
        let chunks = reread_chunks(&activity.reads).expect("chunks");
        let (samples, found) = chunk_samples(&data, &activity, chunks);
        assert_eq!(samples.epochs, 2);
        // A generation's 120 reads, as a data set of 120 samples read once each.
        assert_eq!(samples.in_data_set, 120);
        assert_eq!(found.value("dataset.num_samples_per_file"), Some("120"));
        // One process reading them all: passes over the 40 chunks.
        for r in calls.iter_mut() {
            r.rank = 10;
        }
        let (mut activity, data) = stepped(&calls, 1, 500_000, &[0]);
        activity.paused = false;
        let chunks = reread_chunks(&activity.reads).expect("chunks");
        let (samples, _) = chunk_samples(&data, &activity, chunks);
        assert_eq!((samples.epochs, samples.in_data_set), (6, 40));
    }

    #[test]
    fn epochs_hold_the_steps_each_cut_to_its_share() {
        // A whole number of epochs: none cut.
        assert_eq!(epochs_for_steps(192, 12), (16, 12, false));
        assert_eq!(epochs_for_steps(150, 2), (75, 2, false));
        // 338 steps of epochs of 33: 11 epochs of 31 (341), where 10 whole ones make 330.
        assert_eq!(epochs_for_steps(338, 33), (11, 31, true));
        // Fewer steps than an epoch: one epoch, cut.
        assert_eq!(epochs_for_steps(7, 40), (1, 7, true));
        assert_eq!(epochs_for_steps(5, 0), (5, 1, false));
    }

    #[test]
    fn overlapping_windows_on_a_grid_are_rows_read_through_a_sieve() {
        // Two epochs of a scattered order (37 is prime to 200), with metadata reads before.
        let mut reads = vec![read(-3, 0, 8), read(-2, 96, 512)];
        reads.extend(windows(200, (0..400).map(|i| (i * 37) % 200)));
        let refs: Vec<&Rec> = reads.iter().collect();
        let sieve = sieved_rows(&refs, 65536).expect("a sieve");
        assert_eq!(
            (sieve.window, sieve.stride, sieve.base),
            (65536, 3072, 2048)
        );
        assert_eq!(sieve.rows, 200);
        // Every window read, the short ones at the end too, and not the metadata.
        assert_eq!(sieve.events.len(), 400);
        assert!(!sieve.sequential);
        assert_eq!(sieve.epochs(200, 1), 2);
    }

    #[test]
    fn windows_in_order_make_one_read_per_window_of_rows() {
        // Four threads, each reading 149 rows of 600 in order, three epochs: a window holds 21
        // rows, so each thread reads rows q, q + 21, q + 42, ... of its own.
        let mut reads = Vec::new();
        for epoch in 0..3 {
            for (thread, first) in [0i64, 149, 298, 451].into_iter().enumerate() {
                let mut w = windows(600, (first..first + 149).step_by(21));
                for r in &mut w {
                    r.tid = thread as u32;
                    r.start += epoch * 1_000_000 + thread as i64 * 100;
                }
                reads.extend(w);
            }
        }
        let refs: Vec<&Rec> = reads.iter().collect();
        let sieve = sieved_rows(&refs, 65536).expect("a sieve");
        assert_eq!(sieve.stride, 3072);
        assert!(sieve.sequential);
        // 32 windows an epoch (8 per thread), where a scattered order would make about 580.
        assert_eq!(sieve.rows, 600);
        assert_eq!(sieve.epochs(600, 1), 3);
    }

    #[test]
    fn records_between_a_header_and_a_footer_read_apart_tile_their_file() {
        // A 100-byte header read once, 6 records of 1000 to 1500 bytes read twice each, a
        // gap of padding, and a 50-byte footer read once: file of 8000 bytes.
        let lengths = [1000, 1100, 1200, 1300, 1400, 1500];
        let mut reads = vec![read(0, 0, 100), read(1, 7950, 50)];
        for epoch in 0..2 {
            let mut at = 200;
            for (k, len) in lengths.iter().enumerate() {
                reads.push(read(10 + epoch * 10 + k as i64, at, *len));
                at += len;
            }
        }
        let refs: Vec<&Rec> = reads.iter().collect();
        let tiled = records_tiling(&refs, |_| 8000, 1).expect("records");
        assert_eq!(
            tiled[&1],
            Tiling {
                start: 200,
                end: 7700,
                lengths: lengths.iter().map(|&l| l as u64).collect(),
            }
        );
        // Records that cover under four fifths of the file are not the file's records.
        let short: Vec<&Rec> = refs.iter().copied().filter(|r| r.offset < 4000).collect();
        assert!(records_tiling(&short, |_| 8000, 1).is_none());
        // A read that overlaps the run (the whole file read once) leaves it no tiling.
        let whole = read(99, 0, 8000);
        let mut with_whole = refs.clone();
        with_whole.push(&whole);
        assert!(records_tiling(&with_whole, |_| 8000, 1).is_none());
    }

    #[test]
    fn records_on_page_boundaries_tile_their_file_with_the_padding_unread() {
        // Records of 5000 to 9000 bytes, each at the first 4 KiB page after the one before
        // (an LMDB-like page file), read in a shuffled order, three times each.
        let lengths: Vec<i64> = (0..20).map(|k| 5000 + (k * 1777) % 4000).collect();
        let mut offsets = Vec::new();
        let mut at = 0i64;
        for len in &lengths {
            offsets.push(at);
            at = ((at + len) as u64).next_multiple_of(4096) as i64;
        }
        let size = at as u64;
        let mut reads = Vec::new();
        for epoch in 0..3i64 {
            for k in 0..20usize {
                let k = (k * 7 + epoch as usize) % 20;
                reads.push(read(epoch * 100 + k as i64, offsets[k], lengths[k]));
            }
        }
        let refs: Vec<&Rec> = reads.iter().collect();
        let tiled = records_tiling(&refs, |_| size, 1).expect("records");
        assert_eq!(tiled[&1].start, 0);
        assert_eq!(
            tiled[&1].lengths,
            lengths.iter().map(|&l| l as u64).collect::<Vec<_>>()
        );
        // The last record ends in the last page, past the sum of the lengths by the padding.
        let last = offsets[19] + lengths[19];
        assert_eq!(tiled[&1].end, last as u64);
        assert!(tiled[&1].end > lengths.iter().sum::<i64>() as u64);
        // A gap of more than the padding to the next page is not the next record.
        assert!(!next_record_at(5000, 12288));
        assert!(
            next_record_at(5000, 8192) && next_record_at(5000, 5120) && next_record_at(5000, 5000)
        );
    }

    #[test]
    fn reads_that_do_not_overlap_are_plain_slices() {
        // Slices of 65536 bytes back to back: the grid's step is the read itself.
        let reads: Vec<Rec> = (0..40).map(|i| read(i, i * 65536, 65536)).collect();
        let refs: Vec<&Rec> = reads.iter().collect();
        assert!(sieved_rows(&refs, 65536).is_none());
    }
}

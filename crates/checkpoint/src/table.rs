//! The human-readable checkpoint plan (`dlio checkpoint-plan`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use dlio_config::vocab::Framework;

use crate::{CheckpointMode, CheckpointPlan, FileKind, RankPlan};

/// Up to this many ranks, every rank is listed on its own; above it, ranks whose files have
/// the same kinds and sizes (and the same layers) are listed once, as a group.
const LIST_EVERY_RANK_UP_TO: u32 = 16;

const GIB: f64 = (1u64 << 30) as f64;

/// Renders a plan as `dlio checkpoint-plan` prints it: the layout, every rank's files with
/// their sizes (identical ranks grouped when there are more than 16), then the totals of one
/// checkpoint in bytes and GiB for the model, the optimizer and both.
pub fn format_plan_table(plan: &CheckpointPlan) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_plan(&mut out, plan);
    out
}

fn write_plan(out: &mut String, plan: &CheckpointPlan) -> std::fmt::Result {
    let framework = match plan.framework {
        Framework::Pytorch => "pytorch",
        Framework::Tensorflow => "tensorflow",
    };
    writeln!(
        out,
        "checkpoint plan: {framework}, {} mode, ZeRO stage {}",
        plan.mode.name(),
        plan.zero_stage
    )?;
    let job_ranks = plan.data * u64::from(plan.tensor) * u64::from(plan.pipeline);
    write!(
        out,
        "  {} ranks; emulated job: TP {} x PP {} x DP {} = {job_ranks} ranks",
        plan.world, plan.tensor, plan.pipeline, plan.data
    )?;
    if plan.mode == CheckpointMode::Subset {
        write!(out, " (this run is ranks 0-{} of it)", plan.world - 1)?;
    }
    writeln!(out)?;
    if plan.num_layers > 0 {
        writeln!(
            out,
            "  transformer: {} layers, {} parameters",
            plan.num_layers, plan.num_parameters
        )?;
    }
    writeln!(
        out,
        "  {} files per checkpoint, in <checkpoint_folder>/global_epoch<E>_step<S>/",
        plan.totals.files
    )?;

    for group in groups(plan) {
        writeln!(out)?;
        write_group(out, plan, &group)?;
    }

    let t = &plan.totals;
    writeln!(out)?;
    writeln!(out, "totals of one checkpoint (all ranks):")?;
    writeln!(out, "  {:<10} {:>20} {:>12}", "", "bytes", "GiB")?;
    for (label, bytes) in [
        ("model", t.model_bytes),
        ("optimizer", t.optimizer_bytes),
        ("all", t.checkpoint_bytes),
    ] {
        writeln!(
            out,
            "  {label:<10} {bytes:>20} {:>12.2}",
            bytes as f64 / GIB
        )?;
    }
    if t.metadata_bytes > 0 {
        writeln!(
            out,
            "  plus {} bytes of TensorFlow .index/checkpoint files ({} bytes on storage in all)",
            t.metadata_bytes, t.stored_bytes
        )?;
    }
    let up = &plan.upstream;
    if up.checkpoint_bytes != t.checkpoint_bytes {
        writeln!(
            out,
            "upstream DLIO reports {:.2} GB (model {:.2}, optimizer {:.2}) for this configuration:",
            up.checkpoint_bytes as f64 / GIB,
            up.model_bytes as f64 / GIB,
            up.optimizer_bytes as f64 / GIB,
        )?;
        for difference in &up.differences {
            writeln!(out, "  - {difference}")?;
        }
    }
    Ok(())
}

/// Ranks listed together: the same layers and the same file kinds and sizes.
struct Group<'a> {
    ranks: Vec<&'a RankPlan>,
}

fn groups(plan: &CheckpointPlan) -> Vec<Group<'_>> {
    if plan.world <= LIST_EVERY_RANK_UP_TO {
        return plan
            .ranks
            .iter()
            .map(|r| Group { ranks: vec![r] })
            .collect();
    }
    type Signature = (bool, Option<(u64, u64)>, Vec<(FileKind, u64)>);
    let mut by_signature: BTreeMap<usize, Group<'_>> = BTreeMap::new();
    let mut first_with: Vec<(Signature, usize)> = Vec::new();
    for (i, rank) in plan.ranks.iter().enumerate() {
        let signature: Signature = (
            rank.writer,
            rank.layers,
            rank.files.iter().map(|f| (f.kind, f.bytes)).collect(),
        );
        let first = match first_with.iter().find(|(s, _)| *s == signature) {
            Some((_, first)) => *first,
            None => {
                first_with.push((signature, i));
                i
            }
        };
        by_signature
            .entry(first)
            .or_insert_with(|| Group { ranks: Vec::new() })
            .ranks
            .push(rank);
    }
    by_signature.into_values().collect()
}

fn write_group(out: &mut String, plan: &CheckpointPlan, group: &Group<'_>) -> std::fmt::Result {
    let first = group.ranks[0];
    let n = group.ranks.len();
    let rank_list = compact(group.ranks.iter().map(|r| u64::from(r.rank)));
    if n == 1 {
        write!(out, "rank {rank_list}")?;
    } else {
        write!(out, "ranks {rank_list} ({n} ranks)")?;
    }
    write!(
        out,
        ": tp {}, pp {}, dp {}",
        compact(group.ranks.iter().map(|r| u64::from(r.tensor_rank))),
        compact(group.ranks.iter().map(|r| u64::from(r.pipeline_rank))),
        compact(group.ranks.iter().map(|r| r.data_rank)),
    )?;
    if let Some((a, b)) = first.layers {
        write!(out, ", layers {a}-{b}")?;
    }
    if first.files.is_empty() {
        if first.writer {
            return writeln!(out, ": no files");
        }
        let mp = u64::from(plan.tensor) * u64::from(plan.pipeline);
        return writeln!(
            out,
            ": no files (with ZeRO stage 0 only the first data-parallel replica, ranks 0-{}, saves)",
            mp - 1
        );
    }
    let each = if n == 1 { "" } else { " each" };
    write!(
        out,
        ": {} file{}, {} bytes ({}){each}",
        first.files.len(),
        if first.files.len() == 1 { "" } else { "s" },
        first.bytes(),
        human(first.bytes())
    )?;
    if n == 1 {
        writeln!(out)?;
    } else {
        writeln!(out, "; names of rank {}:", first.rank)?;
    }
    for file in &first.files {
        writeln!(
            out,
            "  {:>16}  {:>10}  {}",
            file.bytes,
            human(file.bytes),
            file.name
        )?;
    }
    Ok(())
}

/// `0-7,16,32-39`: sorted, de-duplicated, runs of consecutive values as ranges.
fn compact(values: impl Iterator<Item = u64>) -> String {
    let mut values: Vec<u64> = values.collect();
    values.sort_unstable();
    values.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < values.len() {
        let start = values[i];
        let mut end = start;
        while i + 1 < values.len() && values[i + 1] == end + 1 {
            i += 1;
            end = values[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            let _ = write!(out, "{start}");
        } else {
            let _ = write!(out, "{start}-{end}");
        }
        i += 1;
    }
    out
}

/// Bytes in binary units with two decimals (`512 B`, `10.00 KiB`, `12.55 GiB`).
fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_joins_consecutive_values_into_ranges() {
        assert_eq!(compact([3, 0, 1, 2, 7, 9, 10].into_iter()), "0-3,7,9-10");
        assert_eq!(compact([5].into_iter()), "5");
        assert_eq!(compact([1, 1, 1].into_iter()), "1");
    }

    #[test]
    fn human_sizes_use_binary_units() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(10240), "10.00 KiB");
        assert_eq!(human(3 << 30), "3.00 GiB");
        assert_eq!(human(5 << 40), "5.00 TiB");
    }
}

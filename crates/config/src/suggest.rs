//! "did you mean ...?" for unknown keys: an edit distance over the keys allowed at the same
//! level, then the same name in another section (`reader.epochs` → `train.epochs`).

use std::sync::OnceLock;

use crate::schema::Config;
use crate::tree::{ALIASES, IGNORED, TIME_KEYS};

/// Every dotted key the loader accepts (sections, leaves, aliases, legacy and ignored names),
/// in schema order.
pub(crate) fn all_keys() -> &'static [String] {
    static KEYS: OnceLock<Vec<String>> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut keys = Vec::new();
        if let Ok(tree) = yaml_serde::to_value(Config::schema_example()) {
            collect(&tree, "", &mut keys);
        }
        for (parent, other, _) in ALIASES {
            keys.push(prefixed(parent, other));
        }
        for (section, key) in TIME_KEYS {
            keys.push(format!("{section}.{key}_stdev"));
        }
        for (key, _) in IGNORED {
            keys.push(key.to_string());
        }
        keys
    })
}

/// The keys accepted directly under `parent` ("" for the top level).
pub(crate) fn keys_under(parent: &str) -> Vec<&'static str> {
    all_keys()
        .iter()
        .filter_map(|k| {
            let rest = if parent.is_empty() {
                Some(k.as_str())
            } else {
                k.strip_prefix(parent).and_then(|r| r.strip_prefix('.'))
            }?;
            (!rest.contains('.')).then_some(rest)
        })
        .collect()
}

/// Whether `path` is a key or section of the schema.
pub(crate) fn is_known(path: &str) -> bool {
    all_keys().iter().any(|k| k == path)
}

fn prefixed(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

fn collect(node: &yaml_serde::Value, path: &str, out: &mut Vec<String>) {
    let Some(map) = node.as_mapping() else {
        return;
    };
    for (key, value) in map {
        let Some(key) = key.as_str() else {
            continue;
        };
        let child = prefixed(path, key);
        out.push(child.clone());
        let is_time = TIME_KEYS.iter().any(|(s, k)| child == format!("{s}.{k}"));
        if is_time {
            continue;
        }
        match value {
            // A list of sections (`dataset.parquet.columns`): its entries' keys sit under the
            // list's own path.
            yaml_serde::Value::Sequence(items) => {
                if let Some(first) = items.first() {
                    collect(first, &child, out);
                }
            }
            _ => collect(value, &child, out),
        }
    }
}

/// The best suggestion for the unknown key `path` (dotted), as a full dotted key.
pub(crate) fn suggest(path: &str) -> Option<String> {
    let (parent, leaf) = match path.rsplit_once('.') {
        Some((p, l)) => (p, l),
        None => ("", path),
    };
    let siblings = keys_under(parent);
    let close = |candidates: &mut dyn Iterator<Item = (String, &str)>, limit: usize| {
        candidates
            .map(|(full, name)| (distance(&leaf.to_ascii_lowercase(), name), full))
            .filter(|(d, _)| *d <= limit)
            .min_by_key(|(d, _)| *d)
            .map(|(_, full)| full)
    };
    let limit = (leaf.chars().count() / 3).max(1);
    // 1. An obvious typo at the same level.
    if let Some(s) = close(&mut siblings.iter().map(|s| (prefixed(parent, s), *s)), 1) {
        return Some(s);
    }
    // 2. The same name in another section (`reader.epochs` → `train.epochs`).
    let elsewhere = all_keys()
        .iter()
        .filter(|k| k.rsplit('.').next() == Some(leaf) && k.as_str() != path)
        .min_by_key(|k| k.len());
    if let Some(k) = elsewhere {
        return Some(k.clone());
    }
    // 3. A further typo at the same level, or a key that starts with what was typed.
    if let Some(s) = close(
        &mut siblings.iter().map(|s| (prefixed(parent, s), *s)),
        limit,
    ) {
        return Some(s);
    }
    if leaf.len() >= 3
        && let Some(s) = siblings
            .iter()
            .filter(|s| s.starts_with(leaf) || leaf.starts_with(**s))
            .min_by_key(|s| s.len())
    {
        return Some(prefixed(parent, s));
    }
    // 3b. Another form of the same word (`evaluate` → `evaluation`): most of what was typed
    // begins the key.
    let common = |s: &str| {
        leaf.chars()
            .zip(s.chars())
            .take_while(|(a, b)| a == b)
            .count()
    };
    if let Some(s) = siblings
        .iter()
        .filter(|s| common(s) >= (leaf.chars().count() * 3 / 4).max(4))
        .max_by_key(|s| common(s))
    {
        return Some(prefixed(parent, s));
    }
    // 4. A typo of a key in another section.
    let mut others = all_keys().iter().filter_map(|k| {
        let name = k.rsplit('.').next()?;
        Some((k.clone(), name))
    });
    close(&mut others, limit)
}

/// Optimal-string-alignment distance (Levenshtein plus adjacent transpositions).
pub(crate) fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev2 = vec![0usize; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0usize; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(prev2[j - 2] + 1);
            }
            cur[j] = best;
        }
        std::mem::swap(&mut prev2, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_form_of_the_word_is_suggested() {
        assert_eq!(
            suggest("workflow.evaluate").as_deref(),
            Some("workflow.evaluation")
        );
    }

    #[test]
    fn distance_counts_edits_and_transpositions() {
        assert_eq!(distance("batch_size", "batch_size"), 0);
        assert_eq!(distance("batchsize", "batch_size"), 1);
        assert_eq!(distance("bacth_size", "batch_size"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("epochs", "epoch"), 1);
    }

    #[test]
    fn schema_keys_include_nested_and_optional_sections() {
        assert!(is_known("model.parallelism.tensor"));
        assert!(is_known("checkpoint.ksm.high_ram_trigger"));
        assert!(is_known("storage.storage_options.endpoint_url"));
        assert!(is_known("dataset.hdf5.chunk_dims"));
        assert!(!is_known("train.computation_time.mean"));
    }

    #[test]
    fn suggestions_prefer_typos_then_other_sections() {
        assert_eq!(
            suggest("reader.batchsize").as_deref(),
            Some("reader.batch_size")
        );
        assert_eq!(suggest("reader.epochs").as_deref(), Some("train.epochs"));
        assert_eq!(suggest("datset").as_deref(), Some("dataset"));
        assert_eq!(suggest("epochs").as_deref(), Some("train.epochs"));
    }
}

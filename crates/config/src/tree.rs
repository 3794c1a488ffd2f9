//! The untyped key tree between the YAML text and the typed [`Config`](crate::Config).
//!
//! Loading goes text → YAML value → this tree (a `serde_json::Value` of string-keyed
//! mappings) → aliases folded → overrides applied → ignored keys removed (with a warning)
//! → `*_stdev` siblings folded → typed config. Keeping a tree until the end lets overrides
//! reach any key, even one the file does not have, with Hydra's semantics.
//!
//! Line numbers come from the parser itself: [`locate`] re-parses the text with a serde
//! visitor that fails on purpose when it reaches the wanted key, and yaml_serde stamps that
//! failure with the key's position. It runs only when a message needs a line, so the normal
//! path pays nothing for it, and it sees exactly what the parser sees (flow mappings,
//! comments, block scalars, anchors), which a line scanner would not.

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Other spellings of a section or key, as `(parent path, other name, name)`. DLIO reads
/// `data_reader` before `reader`; DLIO 2.0.0 reads `dataset.record_length*` while newer
/// upstream reads `dataset.record_length_bytes*`. Both are accepted everywhere.
pub(crate) const ALIASES: &[(&str, &str, &str)] = &[
    ("", "data_reader", "reader"),
    ("dataset", "record_length", "record_length_bytes"),
    (
        "dataset",
        "record_length_stdev",
        "record_length_bytes_stdev",
    ),
    (
        "dataset",
        "record_length_resize",
        "record_length_bytes_resize",
    ),
    // The fork's s3dlio parquet readers read `prefetch` where the others read
    // `prefetch_workers`.
    ("storage.storage_options", "prefetch", "prefetch_workers"),
];

/// Keys mlpstorage writes at the `storage` level that DLIO reads inside
/// `storage.storage_options` (mlpstorage's object mode injects `storage.s3_force_path_style`
/// when an endpoint is set; the fork reads only the option). They are moved there, and a file
/// that gives both with different values is refused.
pub(crate) const STORAGE_LEVEL_OPTIONS: &[&str] = &["s3_force_path_style"];

/// Time keys that accept a legacy `{key}_stdev` sibling, as `(section, key)`.
pub(crate) const TIME_KEYS: &[(&str, &str)] = &[
    ("train", "computation_time"),
    ("evaluation", "eval_time"),
    ("reader", "preprocess_time"),
    ("reader", "batch_time"),
    ("reader", "open_time"),
];

/// Keys that upstream DLIO parses (or that its docs and shipped workloads use) but that have
/// no effect there. They are accepted with one warning each, naming the key DLIO really reads.
pub(crate) const IGNORED: &[(&str, &str)] = &[
    (
        "model.model_size",
        "is ignored, as in DLIO, which reads `model.model_size_bytes`; the flat model state \
         keeps its size (rename the key to `model_size_bytes` to change it)",
    ),
    (
        "checkpoint.model_size",
        "is ignored, as in DLIO, which reads `model.model_size_bytes`; move the value there to \
         change the checkpointed model size",
    ),
    (
        "checkpoint.model_datatype",
        "is ignored, as in DLIO, which reads `model.model_datatype`; move the value there",
    ),
    (
        "checkpoint.type",
        "(rank_zero/all_ranks) has no effect, in DLIO either: which ranks write is decided by \
         `model.parallelism`; remove the key",
    ),
    (
        "dataset.enable_chunking",
        "is ignored, as in DLIO, which reads `dataset.hdf5.chunk_dims`; set that instead",
    ),
    (
        "dataset.chunk_size",
        "is ignored, as in DLIO, which reads `dataset.hdf5.chunk_dims`; set that instead",
    ),
    (
        "dataset.record_element_bytes",
        "is ignored, as in DLIO, which derives it from `dataset.record_element_type`; set that \
         instead",
    ),
    (
        "reader.file_access",
        "has no effect, in DLIO either (it is parsed and never used); remove the key",
    ),
    (
        "dataset.files_pre_sharded",
        "is not read by MLPerf Storage's DLIO fork either (a field it sets itself whenever it \
         trains, not a key); remove the key",
    ),
    (
        "workflow.debug",
        "has no effect, in DLIO either; for verbose logs raise the log level instead",
    ),
];

/// Splits `a.b.c` into segments.
pub(crate) fn segments(path: &str) -> Vec<String> {
    path.split('.').map(str::to_string).collect()
}

/// Joins segments into `a.b.c`.
pub(crate) fn join(segments: &[String]) -> String {
    segments.join(".")
}

/// Renames aliased segments to their canonical names (`data_reader.x` → `reader.x`).
pub(crate) fn canonical(segments: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(segments.len());
    for seg in segments {
        let parent = out.join(".");
        let name = ALIASES
            .iter()
            .find(|(p, other, _)| *p == parent && other == seg)
            .map(|(_, _, name)| name.to_string())
            .unwrap_or_else(|| seg.clone());
        out.push(name);
    }
    out
}

/// The spellings of a canonical segment under a canonical parent (the name first).
pub(crate) fn spellings(parent: &str, seg: &str) -> Vec<String> {
    let mut names = vec![seg.to_string()];
    names.extend(
        ALIASES
            .iter()
            .filter(|(p, _, name)| *p == parent && *name == seg)
            .map(|(_, other, _)| other.to_string()),
    );
    names
}

/// Converts a parsed YAML value into the tree. Errors name the offending key path.
pub(crate) fn from_yaml(value: yaml_serde::Value, path: &str) -> Result<Value, String> {
    Ok(match value {
        yaml_serde::Value::Null => Value::Null,
        yaml_serde::Value::Bool(b) => Value::Bool(b),
        yaml_serde::Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                Value::from(u)
            } else if let Some(i) = n.as_i64() {
                Value::from(i)
            } else {
                let x = n.as_f64().unwrap_or(f64::NAN);
                match serde_json::Number::from_f64(x) {
                    Some(num) => Value::Number(num),
                    None => {
                        return Err(format!(
                            "`{path}` is `{x}`, which is not a usable number; give a finite value"
                        ));
                    }
                }
            }
        }
        yaml_serde::Value::String(s) => Value::String(s),
        yaml_serde::Value::Sequence(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.into_iter().enumerate() {
                out.push(from_yaml(item, &format!("{path}[{i}]"))?);
            }
            Value::Array(out)
        }
        yaml_serde::Value::Mapping(mapping) => {
            let mut out = Map::new();
            for (key, item) in mapping {
                let key = match key {
                    yaml_serde::Value::String(s) => s,
                    other => {
                        let shown = yaml_serde::to_string(&other).unwrap_or_default();
                        let where_ = if path.is_empty() {
                            "the top level".to_string()
                        } else {
                            format!("`{path}`")
                        };
                        return Err(format!(
                            "the key `{}` under {where_} is not a name; keys must be plain words \
                             such as `batch_size` (quote it if it is meant as text)",
                            shown.trim()
                        ));
                    }
                };
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                let value = from_yaml(item, &child)?;
                out.insert(key, value);
            }
            Value::Object(out)
        }
        yaml_serde::Value::Tagged(tagged) => {
            return Err(format!(
                "`{path}` has the YAML tag `{}`, which DLIO workloads do not use; remove the tag",
                tagged.tag
            ));
        }
    })
}

/// The value at `segments`, if any.
pub(crate) fn get<'a>(tree: &'a Value, segments: &[String]) -> Option<&'a Value> {
    let mut node = tree;
    for seg in segments {
        node = node.as_object()?.get(seg)?;
    }
    Some(node)
}

/// Removes and returns the value at `segments`.
pub(crate) fn remove(tree: &mut Value, segments: &[String]) -> Option<Value> {
    let (last, parents) = segments.split_last()?;
    let mut node = tree;
    for seg in parents {
        node = node.as_object_mut()?.get_mut(seg)?;
    }
    node.as_object_mut()?.remove(last)
}

/// The position of the key at `path` (canonical segments) in `text`, as 1-based
/// (line, column), trying every spelling of each segment. `None` when the key is not in the
/// text.
pub(crate) fn locate(text: &str, path: &[String]) -> Option<(usize, usize)> {
    let mut alternatives = Vec::with_capacity(path.len());
    for (i, seg) in path.iter().enumerate() {
        let seg = seg.split('[').next().unwrap_or(seg);
        alternatives.push(spellings(&path[..i].join("."), seg));
    }
    let finder = FindKey {
        path: &alternatives,
    };
    let result = finder.deserialize(yaml_serde::Deserializer::from_str(text));
    match result {
        Err(e) if e.to_string().contains(FOUND) => {
            e.location().map(|loc| (loc.line(), loc.column()))
        }
        _ => None,
    }
}

/// The message of the deliberate error that carries the position out of the parser.
const FOUND: &str = "dlio-config: key found";

struct FindKey<'p> {
    path: &'p [Vec<String>],
}

impl<'de> DeserializeSeed<'de> for FindKey<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FindKey<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((names, rest)) = self.path.split_first() else {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        while let Some(hit) = map.next_key_seed(KeyProbe {
            names,
            last: rest.is_empty(),
        })? {
            if hit {
                map.next_value_seed(FindKey { path: rest })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// Reads one mapping key; fails with [`FOUND`] (stamped with the key's position by the
/// parser) when it is the last segment wanted, returns whether to descend otherwise.
struct KeyProbe<'p> {
    names: &'p [String],
    last: bool,
}

impl<'de> DeserializeSeed<'de> for KeyProbe<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeyProbe<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a mapping key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        let hit = self.names.iter().any(|n| n == key);
        if hit && self.last {
            return Err(E::custom(FOUND));
        }
        Ok(hit)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_none<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}

//! A serde `Deserializer` over the resolved key tree that knows the dotted key path of every
//! value, so that a type error or an unknown key comes back as "`reader.batch_size` must be a
//! non-negative integer, got `seven`" instead of serde's "invalid type: string, expected u64".
//!
//! The tree is a `serde_json::Value` (the YAML file after aliases and overrides were applied).
//! Like yaml_serde does with positions, each `deserialize_*` stamps its path on an error that
//! has none yet, so the innermost path wins.

use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Unexpected,
    Visitor,
};
use serde_json::{Map, Value};

/// A conversion error with the dotted path of the key it concerns.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DeError {
    /// `reader.batch_size`, `dataset.record_dims[1]`; `None` until a deserializer stamps it.
    pub path: Option<String>,
    pub kind: DeErrorKind,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum DeErrorKind {
    /// The value has the wrong type or is out of range.
    Expected { expected: String, got: String },
    /// The key is not in the schema at its level; `known` lists the keys that are.
    UnknownKey { known: Vec<String> },
    /// A string that is not one of the allowed values.
    UnknownVariant { got: String, allowed: Vec<String> },
    /// Anything else (e.g. a malformed time distribution); completes "`key` ...".
    Message(String),
}

impl DeError {
    fn new(kind: DeErrorKind) -> Self {
        DeError { path: None, kind }
    }

    fn at(mut self, path: &str) -> Self {
        if self.path.is_none() {
            self.path = Some(path.to_string());
        }
        self
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = self.path.as_deref().unwrap_or("");
        match &self.kind {
            DeErrorKind::Expected { expected, got } => {
                write!(f, "`{key}` must be {expected}, got {got}")
            }
            DeErrorKind::UnknownKey { .. } => write!(f, "unknown key `{key}`"),
            DeErrorKind::UnknownVariant { got, allowed } => {
                write!(
                    f,
                    "`{key}` must be one of {}, got `{got}`",
                    allowed.join(", ")
                )
            }
            DeErrorKind::Message(m) => write!(f, "`{key}` {m}"),
        }
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError::new(DeErrorKind::Message(msg.to_string()))
    }

    fn invalid_type(unexp: Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        let exp = exp.to_string();
        // A number out of an integer's range: say the range, not just the type.
        let bound = match exp.as_str() {
            "u8" => Some(u64::from(u8::MAX)),
            "u16" => Some(u64::from(u16::MAX)),
            "u32" => Some(u64::from(u32::MAX)),
            "u64" | "usize" => Some(u64::MAX),
            _ => None,
        };
        let numeric = matches!(unexp, Unexpected::Unsigned(_) | Unexpected::Signed(1..));
        let expected = match bound {
            Some(max) if numeric => format!("a non-negative integer up to {max}"),
            _ => friendly_expected(&exp),
        };
        DeError::new(DeErrorKind::Expected {
            expected,
            got: render_unexpected(&unexp),
        })
    }

    fn invalid_value(unexp: Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        Self::invalid_type(unexp, exp)
    }

    fn invalid_length(len: usize, exp: &dyn de::Expected) -> Self {
        DeError::new(DeErrorKind::Expected {
            expected: friendly_expected(&exp.to_string()),
            got: format!("{len} elements"),
        })
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        DeError::new(DeErrorKind::UnknownVariant {
            got: variant.to_string(),
            allowed: expected.iter().map(|s| format!("`{s}`")).collect(),
        })
    }

    fn unknown_field(_field: &str, expected: &'static [&'static str]) -> Self {
        DeError::new(DeErrorKind::UnknownKey {
            known: expected.iter().map(|s| s.to_string()).collect(),
        })
    }
}

/// Turns serde's type names into words a user understands.
fn friendly_expected(exp: &str) -> String {
    match exp {
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a non-negative integer".into(),
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "an integer".into(),
        "f32" | "f64" => "a number".into(),
        "a boolean" => "true or false".into(),
        "a sequence" => "a list (e.g. [1024, 128])".into(),
        s if s.starts_with("struct ") => "a section (a mapping of keys)".into(),
        s if s.starts_with("integer `") => format!("a non-negative integer that fits in {s}"),
        s => s.to_string(),
    }
}

fn render_unexpected(unexp: &Unexpected<'_>) -> String {
    match *unexp {
        Unexpected::Bool(b) => format!("`{b}`"),
        Unexpected::Unsigned(n) => format!("`{n}`"),
        Unexpected::Signed(n) => format!("`{n}`"),
        Unexpected::Float(x) => format!("`{x}`"),
        Unexpected::Char(c) => format!("`{c}`"),
        Unexpected::Str(s) => format!("`{s}`"),
        Unexpected::Unit | Unexpected::Option => "`null`".into(),
        Unexpected::Seq => "a list".into(),
        Unexpected::Map => "a mapping".into(),
        ref other => other.to_string(),
    }
}

fn render_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("`{s}`"),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a mapping".into(),
        other => format!("`{other}`"),
    }
}

fn child_path(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// Deserializes one node of the tree.
pub(crate) struct NodeDe<'a> {
    node: &'a Value,
    path: String,
}

impl<'a> NodeDe<'a> {
    pub(crate) fn root(node: &'a Value) -> Self {
        NodeDe {
            node,
            path: String::new(),
        }
    }

    /// The value as an integer when it is an integral number (so `64.0` or `1e3` fill an
    /// integer field); `None` otherwise.
    fn integral(&self) -> Option<Value> {
        let Value::Number(n) = self.node else {
            return None;
        };
        if n.is_u64() || n.is_i64() {
            return None;
        }
        let x = n.as_f64()?;
        if x.fract() != 0.0 || !x.is_finite() || x.abs() > 9.0e15 {
            return None;
        }
        Some(if x >= 0.0 {
            Value::from(x as u64)
        } else {
            Value::from(x as i64)
        })
    }

    fn integer<'de, V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.integral() {
            Some(value) => NodeDe {
                node: &value,
                path: self.path.clone(),
            }
            .deserialize_any(visitor)
            .map_err(|e| e.at(&self.path)),
            None => self.deserialize_any(visitor),
        }
    }
}

impl<'de> Deserializer<'de> for NodeDe<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let path = self.path;
        match self.node {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else {
                    visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => visitor.visit_str(s),
            Value::Array(items) => visitor.visit_seq(SeqDe {
                items: items.iter(),
                index: 0,
                path: &path,
            }),
            Value::Object(map) => visitor.visit_map(MapDe::new(map, &path)),
        }
        .map_err(|e| e.at(&path))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if let Value::String(s) = self.node {
            let word = s.to_ascii_lowercase();
            let parsed = match word.as_str() {
                "true" | "yes" | "on" | "1" => Some(true),
                "false" | "no" | "off" | "0" => Some(false),
                _ => None,
            };
            if let Some(b) = parsed {
                return visitor.visit_bool(b).map_err(|e: DeError| e.at(&self.path));
            }
        }
        self.deserialize_any(visitor)
    }

    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.integer(visitor)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.integer(visitor)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.integer(visitor)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.integer(visitor)
    }
    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.integer(visitor)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.integer(visitor)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.integer(visitor)
    }
    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.integer(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        // A number where a string is expected (a numeric model name, an endpoint port) is
        // taken as its text, as Python's str() would.
        if let Value::Number(n) = self.node {
            return visitor
                .visit_str(&n.to_string())
                .map_err(|e: DeError| e.at(&self.path));
        }
        self.deserialize_any(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let path = self.path.clone();
        match self.node {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
        .map_err(|e| e.at(&path))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let path = self.path.clone();
        visitor.visit_newtype_struct(self).map_err(|e| e.at(&path))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_map(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        // An empty section (`reader:` with nothing under it) is null in YAML: all defaults.
        if self.node.is_null() {
            let empty = Map::new();
            return visitor
                .visit_map(MapDe::new(&empty, &self.path))
                .map_err(|e: DeError| e.at(&self.path));
        }
        self.deserialize_any(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match self.node {
            // Case-insensitive, as users write `NPZ` or `PyTorch`.
            Value::String(s) => visitor
                .visit_enum(s.to_ascii_lowercase().into_deserializer())
                .map_err(|e: DeError| e.at(&self.path)),
            other => Err(DeError::new(DeErrorKind::UnknownVariant {
                got: render_value(other).trim_matches('`').to_string(),
                allowed: variants.iter().map(|s| format!("`{s}`")).collect(),
            })
            .at(&self.path)),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        i128 u128 f32 f64 char bytes byte_buf unit unit_struct seq tuple tuple_struct identifier
    }
}

struct SeqDe<'a, 'p> {
    items: std::slice::Iter<'a, Value>,
    index: usize,
    path: &'p str,
}

impl<'de> SeqAccess<'de> for SeqDe<'_, '_> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        let Some(item) = self.items.next() else {
            return Ok(None);
        };
        let path = format!("{}[{}]", self.path, self.index);
        self.index += 1;
        seed.deserialize(NodeDe {
            node: item,
            path: path.clone(),
        })
        .map(Some)
        .map_err(|e| e.at(&path))
    }
}

struct MapDe<'a, 'p> {
    entries: serde_json::map::Iter<'a>,
    pending: Option<(String, &'a Value)>,
    path: &'p str,
}

impl<'a, 'p> MapDe<'a, 'p> {
    fn new(map: &'a Map<String, Value>, path: &'p str) -> Self {
        MapDe {
            entries: map.iter(),
            pending: None,
            path,
        }
    }
}

impl<'de> MapAccess<'de> for MapDe<'_, '_> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        let path = child_path(self.path, key);
        let parsed = seed.deserialize(KeyDe { key }).map_err(|e| e.at(&path))?;
        self.pending = Some((path, value));
        Ok(Some(parsed))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        match self.pending.take() {
            // Errors raised after the value was read (a `deserialize_with` function) get the
            // path here.
            Some((path, node)) => seed
                .deserialize(NodeDe {
                    node,
                    path: path.clone(),
                })
                .map_err(|e| e.at(&path)),
            None => Err(de::Error::custom("value requested before its key")),
        }
    }
}

/// Deserializes a mapping key (always a string in our tree).
struct KeyDe<'a> {
    key: &'a str,
}

impl<'de> Deserializer<'de> for KeyDe<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_str(self.key)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

//! The `arrow.fixed_shape_tensor` extension's metadata, both directions: the field's
//! `ARROW:extension:name` and its JSON `ARROW:extension:metadata` object.
//!
//! The canonical extension defines three keys: `shape` (required: the item's physical shape,
//! non-negative integers), `dim_names` (optional: one string per axis) and `permutation`
//! (optional: the logical order of the physical axes, a permutation of `0..ndim`). Reading is
//! strict, as for every input from outside: each key is checked and a bad value refused with
//! the value as found; a key the extension does not define, or one written twice, is refused
//! by name, since dlport cannot know what it would change about the data.

use std::collections::HashMap;
use std::fmt;

use arrow_schema::Field;
use dlport_core::Error;
use dlport_core::error::ValueRule;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;

use super::{EXTENSION_NAME, METADATA_KEY, NAME_KEY, bad_text, refused};

/// What an `arrow.fixed_shape_tensor` field declares, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMetadata {
    /// The physical shape of one item (the values' row-major order).
    pub shape: Vec<i64>,
    /// The names of the logical axes, if the producer sent them (one per axis of an item).
    pub dim_names: Option<Vec<String>>,
    /// `permutation[i]` is the physical axis of logical axis `i`, if the producer sent one.
    pub permutation: Option<Vec<usize>>,
}

impl TensorMetadata {
    /// The logical shape of one item (the physical shape in the permutation's order).
    pub fn logical_shape(&self) -> Vec<i64> {
        match &self.permutation {
            Some(p) => p.iter().map(|&k| self.shape[k]).collect(),
            None => self.shape.clone(),
        }
    }
}

/// The extension metadata of a field, checked: refused if the field is not an
/// `arrow.fixed_shape_tensor` or if any key breaks the extension's rules (see the module
/// documentation).
pub fn tensor_metadata(field: &Field) -> Result<TensorMetadata, Error> {
    parse_field(field.metadata())
}

/// As [`tensor_metadata`], over a field's key-value metadata.
pub(super) fn parse_field(metadata: &HashMap<String, String>) -> Result<TensorMetadata, Error> {
    match metadata.get(NAME_KEY).map(String::as_str) {
        Some(EXTENSION_NAME) => {}
        Some(other) => {
            return Err(bad_text(
                &ValueRule {
                    field: "ARROW:extension:name",
                    expected: "\"arrow.fixed_shape_tensor\": dlport reads tensors from that \
                               extension type only",
                },
                &format!("{other:?}"),
            ));
        }
        None => {
            return Err(refused(
                "columns that are not arrow.fixed_shape_tensor (the field has no \
                 ARROW:extension:name key)",
            ));
        }
    }
    let Some(text) = metadata.get(METADATA_KEY) else {
        return Err(bad_text(
            &ValueRule {
                field: "field metadata",
                expected: "an ARROW:extension:metadata key beside ARROW:extension:name, holding \
                           a JSON object such as {\"shape\": [2, 3]}",
            },
            "missing key ARROW:extension:metadata",
        ));
    };
    parse_json(text)
}

/// The object's entries in order, duplicates kept (serde_json's `Value` keeps the last).
struct Entries(Vec<(String, Value)>);

impl<'de> serde::Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry::<String, Value>()? {
                    out.push(entry);
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// A JSON value as the error shows it (compact JSON, cut by the error).
fn shown(v: &Value) -> String {
    v.to_string()
}

/// Checks the extension's JSON metadata text.
pub(super) fn parse_json(text: &str) -> Result<TensorMetadata, Error> {
    let Entries(entries) = serde_json::from_str(text).map_err(|e| {
        bad_text(
            &ValueRule {
                field: "ARROW:extension:metadata",
                expected: "a JSON object such as {\"shape\": [2, 3]} (the text does not parse as \
                           one)",
            },
            &format!("{text:?} ({e})"),
        )
    })?;
    let (mut shape, mut dim_names, mut permutation) = (None, None, None);
    for (key, value) in entries {
        let slot = match key.as_str() {
            "shape" => &mut shape,
            "dim_names" => &mut dim_names,
            "permutation" => &mut permutation,
            _ => {
                return Err(bad_text(
                    &ValueRule {
                        field: "ARROW:extension:metadata key",
                        expected: "one of \"shape\", \"dim_names\", \"permutation\" (the keys the \
                                   fixed_shape_tensor extension defines)",
                    },
                    &format!("{key:?}"),
                ));
            }
        };
        if slot.is_some() {
            return Err(bad_text(
                &ValueRule {
                    field: "ARROW:extension:metadata key",
                    expected: "written once (this key appears twice)",
                },
                &format!("{key:?}"),
            ));
        }
        *slot = Some(value);
    }
    let shape = shape.ok_or_else(|| {
        bad_text(
            &ValueRule {
                field: "ARROW:extension:metadata",
                expected: "an object with a \"shape\" key (the extension requires it)",
            },
            &format!("{text:?}: missing key \"shape\""),
        )
    })?;
    let shape = int_array(
        &shape,
        &ValueRule {
            field: "shape",
            expected: "an array of integers from 0 to 2^63 - 1",
        },
    )?;
    dlport_core::layout::check_ndim(shape.len() as i64 + 1)?;
    let ndim = shape.len();
    let permutation = permutation
        .map(|v| {
            const RULE: ValueRule = ValueRule {
                field: "permutation",
                expected: "a permutation of 0..ndim, one entry per axis of the shape",
            };
            let p = int_array(&v, &RULE)?;
            let mut seen = vec![false; ndim];
            for &i in &p {
                match usize::try_from(i).ok().and_then(|i| seen.get_mut(i)) {
                    Some(s) if !*s => *s = true,
                    _ => return Err(bad_text(&RULE, &shown(&v))),
                }
            }
            if p.len() != ndim {
                return Err(bad_text(&RULE, &shown(&v)));
            }
            Ok(p.into_iter().map(|i| i as usize).collect::<Vec<_>>())
        })
        .transpose()?;
    let dim_names = dim_names
        .map(|v| {
            const RULE: ValueRule = ValueRule {
                field: "dim_names",
                expected: "an array of strings, one per axis of the shape",
            };
            let names = v.as_array().ok_or_else(|| bad_text(&RULE, &shown(&v)))?;
            if names.len() != ndim {
                return Err(bad_text(&RULE, &shown(&v)));
            }
            names
                .iter()
                .map(|n| n.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad_text(&RULE, &shown(&v)))
        })
        .transpose()?;
    Ok(TensorMetadata {
        shape,
        dim_names,
        permutation,
    })
}

/// A JSON array of integers in `0..=i64::MAX`, or the refusal showing the whole value.
fn int_array(v: &Value, rule: &'static ValueRule) -> Result<Vec<i64>, Error> {
    v.as_array()
        .and_then(|items| {
            items
                .iter()
                .map(|x| x.as_u64().and_then(|n| i64::try_from(n).ok()))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| bad_text(rule, &shown(v)))
}

/// The JSON metadata of a tensor whose item's physical shape is `shape` and whose logical axes
/// are `permutation` of it.
pub(super) fn to_json(shape: &[i64], permutation: Option<&[usize]>) -> String {
    let mut meta = serde_json::json!({ "shape": shape });
    if let Some(p) = permutation {
        meta["permutation"] = serde_json::json!(p);
    }
    meta.to_string()
}

/// The product of a shape, refused with the shape shown when it passes `i64::MAX`.
pub(super) fn element_count(shape: &[i64]) -> Result<i64, Error> {
    shape
        .iter()
        .try_fold(1i64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| {
            bad_text(
                &ValueRule {
                    field: "shape",
                    expected: "a shape whose product is at most 2^63 - 1",
                },
                &format!("{shape:?}"),
            )
        })
}

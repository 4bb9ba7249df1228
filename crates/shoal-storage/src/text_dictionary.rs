//! Dictionary encoding of a column table's text columns. Each text column of a column table has
//! one `TextDictionary`: the distinct values of its rows, numbered in the order they arrived. A
//! segment stores such a column as one 4-byte code per row into it, and a scan hands the codes
//! out with the dictionary's values as an Arrow `DictionaryArray` without copying either. Taxi
//! data's cab types, boroughs and neighbourhood names take 4 bytes a row instead of their text.
//!
//! The dictionary only grows (codes never change meaning), so every segment coded with it agrees
//! on what a code means: a GROUP BY on the column can group on the codes and look up the few
//! values of the groups at the end. It is bounded (`DICTIONARY_VALUES_MAX` values and
//! `DICTIONARY_VALUE_BYTES_MAX` bytes): a segment whose new values would pass a bound keeps a
//! dictionary of its own (high-cardinality text such as ids or coordinates costs its values plus
//! 4 bytes a row that way), and from then on the column is no longer `shared`. The dictionary
//! lives as long as its table: TRUNCATE leaves it, since scans that started before the TRUNCATE
//! may still be reading codes from it.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, DictionaryArray, Int32Array, StringArray};
use arrow::datatypes::{DataType, Int32Type};
use parking_lot::RwLock;

/// Most distinct values a column's dictionary holds.
pub const DICTIONARY_VALUES_MAX: usize = 1 << 16;
/// Most bytes of text a column's dictionary holds.
pub const DICTIONARY_VALUE_BYTES_MAX: usize = 1 << 20;

/// The Arrow type a column table hands out for a text column: codes into its values.
pub fn coded_text_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

#[derive(Debug)]
pub struct TextDictionary {
    state: RwLock<DictionaryState>,
}

#[derive(Debug)]
struct DictionaryState {
    /// A `StringArray`: the value of code `i` is its row `i`. Replaced (never changed) when values
    /// are added, so a scan's `DictionaryArray` keeps the one it took.
    values: ArrayRef,
    codes: HashMap<Box<str>, i32, foldhash::fast::RandomState>,
    value_bytes: usize,
    /// No segment has fallen back to a dictionary of its own.
    shared: bool,
}

impl Default for TextDictionary {
    fn default() -> Self {
        TextDictionary {
            state: RwLock::new(DictionaryState {
                values: Arc::new(StringArray::from(Vec::<&str>::new())),
                codes: HashMap::default(),
                value_bytes: 0,
                shared: true,
            }),
        }
    }
}

impl TextDictionary {
    /// The values, by code.
    pub fn values(&self) -> ArrayRef {
        self.state.read().values.clone()
    }

    pub fn len(&self) -> usize {
        self.state.read().codes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether every segment of the column stores codes into this dictionary.
    pub fn is_shared(&self) -> bool {
        self.state.read().shared
    }

    pub fn code_of(&self, value: &str) -> Option<i32> {
        self.state.read().codes.get(value).copied()
    }

    pub fn memory_bytes(&self) -> usize {
        let state = self.state.read();
        // The map's keys are a second copy of the text; each entry also holds a pointer, a
        // length, the code and about a byte of control.
        state.values.get_array_memory_size()
            + state.value_bytes
            + state.codes.capacity() * (std::mem::size_of::<(Box<str>, i32)>() + 1)
    }

    /// Codes `array` (text, or a dictionary of text) into this dictionary, adding its new values.
    /// None when they would pass the bounds; the column is then no longer shared and the caller
    /// keeps the array's own dictionary.
    pub(crate) fn encode(&self, local: &DictionaryArray<Int32Type>) -> Option<Int32Array> {
        let local_values = local.values().as_string::<i32>();
        if local.len() >= CARDINALITY_SAMPLE_ROWS && local_values.len() >= local.len() {
            // A value per row (`local_dictionary`'s high-cardinality form): no room for it.
            self.state.write().shared = false;
            return None;
        }
        let remap = self.codes_for(local_values)?;
        Some(remap_keys(local.keys(), &remap))
    }

    /// This dictionary's code of each of `values` (distinct), adding the missing ones.
    fn codes_for(&self, values: &StringArray) -> Option<Vec<i32>> {
        {
            let state = self.state.read();
            let known: Option<Vec<i32>> = values
                .iter()
                .map(|v| state.codes.get(v.unwrap_or("")).copied())
                .collect();
            if known.is_some() {
                return known;
            }
            if !state.shared {
                return None;
            }
        }
        let mut state = self.state.write();
        // More values than could ever fit are refused before looking them up one by one.
        if values.len() > DICTIONARY_VALUES_MAX {
            state.shared = false;
            return None;
        }
        let missing: Vec<&str> = values
            .iter()
            .map(|v| v.unwrap_or(""))
            .filter(|v| !state.codes.contains_key(*v))
            .collect();
        let added_bytes: usize = missing.iter().map(|v| v.len()).sum();
        if state.codes.len() + missing.len() > DICTIONARY_VALUES_MAX
            || state.value_bytes + added_bytes > DICTIONARY_VALUE_BYTES_MAX
        {
            state.shared = false;
            return None;
        }
        if !missing.is_empty() {
            let old = state.values.clone();
            let added = StringArray::from(missing.clone());
            state.values = arrow::compute::concat(&[old.as_ref(), &added])
                .expect("concatenating two string arrays");
            for v in missing {
                let code = state.codes.len() as i32;
                state.codes.insert(v.into(), code);
            }
            state.value_bytes += added_bytes;
        }
        debug_assert_eq!(state.values.len(), state.codes.len());
        let codes = values
            .iter()
            .map(|v| state.codes[v.unwrap_or("")])
            .collect();
        Some(codes)
    }
}

/// `keys` into one list of values as codes into another: key k becomes `remap[k]`, NULLs stay.
pub fn remap_keys(keys: &Int32Array, remap: &[i32]) -> Int32Array {
    // A NULL row's key may be anything (often 0 of an empty dictionary): code it as 0.
    let codes: Vec<i32> = keys
        .values()
        .iter()
        .map(|&k| remap.get(k as usize).copied().unwrap_or(0))
        .collect();
    Int32Array::new(codes.into(), keys.nulls().cloned())
}

/// Rows of a text array looked at to tell high-cardinality text, and the most distinct values
/// among them that low-cardinality text may have.
const CARDINALITY_SAMPLE_ROWS: usize = 2048;
const CARDINALITY_SAMPLE_DISTINCT_MAX: usize = CARDINALITY_SAMPLE_ROWS / 4;

/// `array` as a dictionary of text with 4-byte keys (its own, if it already is one). Text that
/// looks high-cardinality (ids, coordinates) is not hashed at all: it becomes a dictionary whose
/// values are the array itself, key i for row i, which no table dictionary has room for.
pub fn local_dictionary(array: &ArrayRef) -> DictionaryArray<Int32Type> {
    if array.data_type() == &coded_text_type() {
        return array.as_dictionary::<Int32Type>().clone();
    }
    let text = array.as_string::<i32>();
    if looks_high_cardinality(text) {
        let keys = Int32Array::new(
            (0..text.len() as i32).collect::<Vec<i32>>().into(),
            text.nulls().cloned(),
        );
        return DictionaryArray::try_new(keys, array.clone()).expect("key i < len");
    }
    let cast = arrow::compute::cast(array, &coded_text_type())
        .expect("text casts to a dictionary of text");
    cast.as_dictionary::<Int32Type>().clone()
}

/// Whether more than a quarter of the first `CARDINALITY_SAMPLE_ROWS` values are distinct.
fn looks_high_cardinality(text: &StringArray) -> bool {
    if text.len() < CARDINALITY_SAMPLE_ROWS {
        return false;
    }
    let mut seen: std::collections::HashSet<&str, foldhash::fast::RandomState> = Default::default();
    for v in text.iter().take(CARDINALITY_SAMPLE_ROWS).flatten() {
        seen.insert(v);
        if seen.len() > CARDINALITY_SAMPLE_DISTINCT_MAX {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(values: &[Option<&str>]) -> ArrayRef {
        Arc::new(StringArray::from(values.to_vec()))
    }

    fn decode(codes: &Int32Array, dict: &TextDictionary) -> Vec<Option<String>> {
        let array = DictionaryArray::<Int32Type>::try_new(codes.clone(), dict.values()).unwrap();
        let plain = arrow::compute::cast(&array, &DataType::Utf8).unwrap();
        plain
            .as_string::<i32>()
            .iter()
            .map(|v| v.map(str::to_string))
            .collect()
    }

    #[test]
    fn codes_agree_across_segments_and_decode_to_the_input() {
        let dict = TextDictionary::default();
        let first = text(&[Some("yellow"), Some("green"), None, Some("yellow")]);
        let second = text(&[Some("uber"), Some("yellow"), Some("")]);
        let a = dict.encode(&local_dictionary(&first)).unwrap();
        let b = dict.encode(&local_dictionary(&second)).unwrap();
        assert_eq!(a.value(0), b.value(1), "yellow has one code");
        assert_eq!(dict.len(), 4);
        assert!(a.is_null(2));
        assert_eq!(
            decode(&a, &dict),
            vec![
                Some("yellow".into()),
                Some("green".into()),
                None,
                Some("yellow".into())
            ]
        );
        assert_eq!(
            decode(&b, &dict),
            vec![Some("uber".into()), Some("yellow".into()), Some("".into())]
        );
        assert!(dict.is_shared());
    }

    #[test]
    fn all_null_column_codes_to_nulls() {
        let dict = TextDictionary::default();
        let codes = dict
            .encode(&local_dictionary(&text(&[None, None])))
            .unwrap();
        assert_eq!(codes.null_count(), 2);
        assert!(dict.is_empty());
    }

    #[test]
    fn a_segment_past_the_bound_keeps_its_own_dictionary() {
        let dict = TextDictionary::default();
        dict.encode(&local_dictionary(&text(&[Some("a")]))).unwrap();
        let many: Vec<String> = (0..DICTIONARY_VALUES_MAX)
            .map(|i| format!("v{i}"))
            .collect();
        let many: ArrayRef = Arc::new(StringArray::from_iter_values(many));
        assert!(dict.encode(&local_dictionary(&many)).is_none());
        assert!(!dict.is_shared());
        assert_eq!(dict.len(), 1, "nothing of the refused segment was added");
        // Known values still code; new ones no longer do.
        assert!(dict
            .encode(&local_dictionary(&text(&[Some("a")])))
            .is_some());
        assert!(dict
            .encode(&local_dictionary(&text(&[Some("b")])))
            .is_none());
    }

    #[test]
    fn high_cardinality_text_is_not_hashed_and_keeps_a_value_per_row() {
        let dict = TextDictionary::default();
        let ids: ArrayRef = Arc::new(StringArray::from_iter(
            (0..4096).map(|i| (i % 100 != 0).then(|| format!("id-{i}"))),
        ));
        let local = local_dictionary(&ids);
        assert_eq!(local.values().len(), 4096, "the array itself is the values");
        assert_eq!(local.null_count(), 41);
        let back = arrow::compute::cast(&local, &DataType::Utf8).unwrap();
        assert_eq!(&back, &ids);
        assert!(dict.encode(&local).is_none());
        assert!(!dict.is_shared());
        // Repetitive text of the same length is hashed into a small dictionary.
        let kinds: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..4096).map(|i| format!("kind-{}", i % 7)),
        ));
        assert_eq!(local_dictionary(&kinds).values().len(), 7);
    }

    #[test]
    fn long_values_pass_the_byte_bound() {
        let dict = TextDictionary::default();
        let big = "x".repeat(DICTIONARY_VALUE_BYTES_MAX + 1);
        assert!(dict
            .encode(&local_dictionary(&text(&[Some(big.as_str())])))
            .is_none());
    }
}

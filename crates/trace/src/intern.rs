//! Small numbers for the static strings of spans: category + name pairs and argument keys.
//!
//! A span record carries a two-byte id per string instead of a sixteen-byte `&str`, so a
//! record with its arguments is 64 bytes instead of about 150, and the span guard a caller
//! builds with `.epoch(..).arg(..)` moves in registers rather than through `memcpy`. On a
//! small-record run the copies of the larger records were a fifth of tracing's instructions
//! per sample (callgrind). The tables are process-wide and only grow; each thread keeps the
//! last few strings it looked up (by address), so a lookup on the hot path is a few
//! comparisons and takes no lock.

use std::cell::Cell;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread::LocalKey;

use crate::names::SpanName;

/// The number a span name or an argument key stands for in a record.
pub(crate) type NameId = u16;

/// The id every string gets once a table is full (the writer writes it as `?`).
const OVERFLOW: NameId = NameId::MAX;

/// What a full table's strings are written as.
pub(crate) const UNKNOWN: &str = "?";

static SPANS: Mutex<Vec<(&'static str, &'static str)>> = Mutex::new(Vec::new());
static KEYS: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

/// Strings a thread remembers, with their ids.
const REMEMBERED: usize = 8;

/// A span name by the addresses and lengths of its two strings.
type SpanKey = (usize, usize, usize, usize);
/// An argument key by its address and length.
type KeyKey = (usize, usize);

thread_local! {
    static SPAN_IDS: [Cell<(SpanKey, NameId)>; REMEMBERED] =
        const { [const { Cell::new(((0, 0, 0, 0), 0)) }; REMEMBERED] };
    static SPAN_NEXT: Cell<usize> = const { Cell::new(0) };
    static KEY_IDS: [Cell<(KeyKey, NameId)>; REMEMBERED] =
        const { [const { Cell::new(((0, 0), 0)) }; REMEMBERED] };
    static KEY_NEXT: Cell<usize> = const { Cell::new(0) };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The id of `items`' entry equal to `item`, added if there is none.
fn id_in<T: PartialEq + Copy>(items: &mut Vec<T>, item: T) -> NameId {
    if let Some(i) = items.iter().position(|x| *x == item) {
        return NameId::try_from(i).unwrap_or(OVERFLOW);
    }
    if items.len() >= usize::from(OVERFLOW) {
        return OVERFLOW;
    }
    items.push(item);
    (items.len() - 1) as NameId
}

/// The id remembered for `key` on this thread, or `global`'s, which is then remembered.
/// Equal addresses and lengths mean equal (static) strings, so a remembered id is right.
fn remembered<K: Copy + PartialEq + 'static>(
    ids: &'static LocalKey<[Cell<(K, NameId)>; REMEMBERED]>,
    next: &'static LocalKey<Cell<usize>>,
    key: K,
    global: impl FnOnce() -> NameId,
) -> NameId {
    let found = ids
        .try_with(|ids| {
            ids.iter()
                .map(Cell::get)
                .find(|&(k, _)| k == key)
                .map(|(_, id)| id)
        })
        .ok()
        .flatten();
    if let Some(id) = found {
        return id;
    }
    let id = global();
    let _ = ids.try_with(|ids| {
        let _ = next.try_with(|next| {
            let slot = next.get() % REMEMBERED;
            ids[slot].set((key, id));
            next.set(slot + 1);
        });
    });
    id
}

/// The id of a span name.
pub(crate) fn span_id(span: SpanName) -> NameId {
    let key = (
        span.cat.as_ptr() as usize,
        span.cat.len(),
        span.name.as_ptr() as usize,
        span.name.len(),
    );
    remembered(&SPAN_IDS, &SPAN_NEXT, key, || {
        id_in(&mut lock(&SPANS), (span.cat, span.name))
    })
}

/// The id of an argument key.
pub(crate) fn key_id(key: &'static str) -> NameId {
    remembered(
        &KEY_IDS,
        &KEY_NEXT,
        (key.as_ptr() as usize, key.len()),
        || id_in(&mut lock(&KEYS), key),
    )
}

/// Every span name so far, by id.
pub(crate) fn span_names() -> Vec<(&'static str, &'static str)> {
    lock(&SPANS).clone()
}

/// Every argument key so far, by id.
pub(crate) fn keys() -> Vec<&'static str> {
    lock(&KEYS).clone()
}

/// Span name `id` from a snapshot of [`span_names`].
pub(crate) fn span_name(
    names: &[(&'static str, &'static str)],
    id: NameId,
) -> (&'static str, &'static str) {
    names
        .get(usize::from(id))
        .copied()
        .unwrap_or((UNKNOWN, UNKNOWN))
}

/// Argument key `id` from a snapshot of [`keys`].
pub(crate) fn key(keys: &[&'static str], id: NameId) -> &'static str {
    keys.get(usize::from(id)).copied().unwrap_or(UNKNOWN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_get_one_id_and_different_ones_two() {
        let a = span_id(SpanName::new("intern-test", "a"));
        let b = span_id(SpanName::new("intern-test", "b"));
        assert_ne!(a, b);
        // The same text at another address (a String leaked for the test).
        let again: &'static str = Box::leak("intern-test".to_string().into_boxed_str());
        assert_eq!(span_id(SpanName::new(again, "a")), a);
        assert_eq!(span_name(&span_names(), a), ("intern-test", "a"));
        let k = key_id("intern_key");
        assert_eq!(key_id("intern_key"), k);
        assert_eq!(key(&keys(), k), "intern_key");
        assert_ne!(key_id("intern_key_2"), k);
        assert_eq!(key(&[], 7), UNKNOWN);
    }

    #[test]
    fn a_thread_remembers_more_strings_than_its_cache_holds() {
        let names: Vec<&'static str> = (0..3 * REMEMBERED)
            .map(|i| &*Box::leak(format!("intern-many-{i}").into_boxed_str()))
            .collect();
        let ids: Vec<NameId> = names.iter().map(|n| key_id(n)).collect();
        for (n, id) in names.iter().zip(&ids) {
            assert_eq!(key_id(n), *id);
            assert_eq!(key(&keys(), *id), *n);
        }
    }
}

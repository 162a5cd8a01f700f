//! Generations: which writer owns a database's bucket (Neon's generation
//! numbers, SlateDB's writer epochs).
//!
//! A writer that opens a database takes the next generation: it puts
//! `generations/{g:020}` create-only, `g` one above the highest it lists.
//! Of two writers racing for one number exactly one wins (the store's
//! create-only put); the other takes the next. Every object a writer
//! uploads carries its generation in its key ([`object_key`]), so two
//! writers never write one key. A generation is a name, not yet the right
//! to write: that is the claim of the index sequence (`index::claim`),
//! which fences the writer before; a generation taken by an open that
//! stopped before its claim fences no one.
//!
//! Invariants: generations start at 1 and only grow; a generation object
//! is never rewritten or deleted by strata; the keys are fixed-width
//! decimal so that they sort as their numbers.

use super::{ObjectInfo, PutMode, RemoteStore};
use crate::error::{Error, RemoteErrorKind, Result};

/// Where the generation objects are.
pub const GENERATIONS_PREFIX: &str = "generations/";

/// Times [`acquire`] tries the next number after losing a race.
const ACQUIRE_TRIES_MAX: u32 = 64;

/// The key of generation `g`'s object.
pub fn generation_key(g: u64) -> String {
    format!("{GENERATIONS_PREFIX}{g:020}")
}

/// The generation a key of `generations/` names; `None` for any other key.
pub fn parse_generation_key(key: &str) -> Option<u64> {
    parse_generation_digits(key.strip_prefix(GENERATIONS_PREFIX)?)
}

/// A generation as keys write it: exactly 20 decimal digits.
fn parse_generation_digits(digits: &str) -> Option<u64> {
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The key of object `name` (e.g. a layer file's name) written by
/// generation `g`: `{name}-g{g:020}`.
pub fn object_key(name: &str, g: u64) -> String {
    format!("{name}-g{g:020}")
}

/// The generation in an object key of [`object_key`]'s form; `None` for
/// any other key.
pub fn parse_object_generation(key: &str) -> Option<u64> {
    parse_generation_digits(key.rsplit_once("-g")?.1)
}

/// The highest generation in `store`; 0 when there is none.
pub fn latest(store: &dyn RemoteStore) -> Result<u64> {
    Ok(store
        .list(GENERATIONS_PREFIX)?
        .iter()
        .filter_map(|o: &ObjectInfo| parse_generation_key(&o.key))
        .max()
        .unwrap_or(0))
}

/// Takes a new generation for a writer: the lowest number above every one
/// in `store` that this writer's create-only put wins. `owner` is written
/// into the object (who took it, for `strata inspect`).
pub fn acquire(store: &dyn RemoteStore, owner: &str) -> Result<u64> {
    let mut g = latest(store)? + 1;
    for _ in 0..ACQUIRE_TRIES_MAX {
        match store.put(
            &generation_key(g),
            owner.as_bytes().to_vec().into(),
            PutMode::Create,
        ) {
            Ok(()) => return Ok(g),
            // Another writer took it: try above what is there now.
            Err(Error::Remote {
                kind: RemoteErrorKind::AlreadyExists,
                ..
            }) => g = (latest(store)? + 1).max(g + 1),
            Err(e) => return Err(e),
        }
    }
    Err(Error::Internal(format!(
        "{} writers raced for a generation {ACQUIRE_TRIES_MAX} times in a row",
        store.url()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::DirRemote;

    #[test]
    fn keys_sort_as_their_generations() {
        assert_eq!(generation_key(7), "generations/00000000000000000007");
        assert_eq!(
            parse_generation_key(&generation_key(u64::MAX)),
            Some(u64::MAX)
        );
        for bad in [
            "generations/7",
            "generations/0000000000000000000x",
            "layers/00000000000000000007",
        ] {
            assert_eq!(parse_generation_key(bad), None, "{bad}");
        }
        assert!(generation_key(9) < generation_key(10));
        assert_eq!(
            object_key("00000001.delta", 3),
            "00000001.delta-g00000000000000000003"
        );
        let key = object_key("layers/00000001.delta", 12);
        assert_eq!(parse_object_generation(&key), Some(12));
        for bad in [
            "layers/1.delta",
            "layers/1.delta-g12",
            "layers/1.delta-g0000000000000000001x",
        ] {
            assert_eq!(parse_object_generation(bad), None, "{bad}");
        }
    }

    #[test]
    fn racing_writers_take_distinct_generations() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirRemote::open(dir.path()).unwrap();
        assert_eq!(latest(&store).unwrap(), 0);
        let gens: Vec<u64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|i| {
                    let store = &store;
                    s.spawn(move || acquire(store, &format!("writer {i}")).unwrap())
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut sorted = gens.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (1..=8).collect::<Vec<u64>>(), "{gens:?}");
    }
}

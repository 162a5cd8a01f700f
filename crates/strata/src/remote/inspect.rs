//! What a remote store holds of a database, read-only (`strata inspect
//! --remote URL`): its generations and who took them, its indexes, the
//! newest index with the manifest inside it, objects the newest index does
//! not list (orphans: files it replaced, which its writer deletes next,
//! or uploads of a fenced or stopped writer, which the next writer
//! deletes), objects it lists that are missing, and with `verify` every
//! listed object read and checked against its index's length and crc32c.
//! Older indexes may list objects deleted since: only the newest counts.
//!
//! Invariant: nothing is written or deleted. A damaged index or object is
//! an error naming it (`{store}/{key}`), as a damaged file is locally.

use super::generation::{parse_generation_key, GENERATIONS_PREFIX};
use super::index::{RemoteIndex, INDEX_PREFIX};
use super::{ObjectInfo, RemoteStore};
use crate::error::Result;
use crate::types::Lsn;
use std::collections::BTreeSet;

/// An object the newest index lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedObject {
    /// The file's name in a database directory.
    pub name: String,
    pub key: String,
    pub bytes: u64,
}

/// The newest index, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSummary {
    pub key: String,
    pub generation: u64,
    pub seq: u64,
    /// Every write at or below it is in the listed objects.
    pub lsn: Lsn,
    pub objects: Vec<ListedObject>,
    /// From the manifest inside the index.
    pub layers: usize,
    pub value_files: usize,
    pub gc_lsn: Lsn,
}

/// What [`inspect_store`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreReport {
    pub url: String,
    /// Each generation and what its object says (the token of the open
    /// that took it).
    pub generations: Vec<(u64, String)>,
    /// Every index key, oldest first.
    pub indexes: Vec<String>,
    pub newest: Option<IndexSummary>,
    /// Layer and value objects the newest index does not list.
    pub orphans: Vec<ObjectInfo>,
    /// Keys the newest index lists that the store does not hold.
    pub missing: Vec<String>,
    /// Objects read and checked (`verify`): those the newest index lists.
    pub verified: usize,
}

/// Reads what `store` holds (see the module comment).
pub fn inspect_store(store: &dyn RemoteStore, verify: bool) -> Result<StoreReport> {
    let url = store.url().to_string();
    let mut generations = Vec::new();
    for o in store.list(GENERATIONS_PREFIX)? {
        if let Some(g) = parse_generation_key(&o.key) {
            let owner = store.get(&o.key)?;
            generations.push((g, String::from_utf8_lossy(&owner).into_owned()));
        }
    }
    let all = store.list("")?;
    let present: BTreeSet<&str> = all.iter().map(|o| o.key.as_str()).collect();
    let indexes: Vec<String> = all
        .iter()
        .filter(|o| o.key.starts_with(INDEX_PREFIX))
        .map(|o| o.key.clone())
        .collect();
    let mut listed = BTreeSet::new();
    let mut missing = BTreeSet::new();
    let mut newest = None;
    for key in &indexes {
        let index = RemoteIndex::decode(&url, key, &store.get(key)?)?;
        // Each index decoded (a damaged one is named); the newest counts.
        listed.clear();
        missing.clear();
        for o in &index.objects {
            listed.insert(o.key.clone());
            if !present.contains(o.key.as_str()) {
                missing.insert(o.key.clone());
            }
        }
        newest = Some((key.clone(), index));
    }
    let orphans = all
        .iter()
        .filter(|o| {
            (o.key.starts_with("layers/") || o.key.starts_with("values/"))
                && !listed.contains(&o.key)
        })
        .cloned()
        .collect();
    let mut verified = 0;
    let newest = match newest {
        None => None,
        Some((key, index)) => {
            // An empty manifest: a claim of a store that held no database.
            let state = if index.manifest.is_empty() {
                crate::manifest::ManifestState::default()
            } else {
                crate::manifest::decode(
                    std::path::Path::new(&format!("{url}/{key}")),
                    &index.manifest,
                )?
                .state
            };
            if verify {
                for o in &index.objects {
                    if missing.contains(&o.key) {
                        continue;
                    }
                    o.check(&url, &key, &store.get(&o.key)?)?;
                    verified += 1;
                }
            }
            Some(IndexSummary {
                key,
                generation: index.generation,
                seq: index.seq,
                lsn: index.lsn,
                objects: index
                    .objects
                    .iter()
                    .map(|o| ListedObject {
                        name: o.name.clone(),
                        key: o.key.clone(),
                        bytes: o.bytes,
                    })
                    .collect(),
                layers: state.layers.len(),
                value_files: state.value_files.len(),
                gc_lsn: state.gc_lsn,
            })
        }
    };
    Ok(StoreReport {
        url,
        generations,
        indexes,
        newest,
        orphans,
        missing: missing.into_iter().collect(),
        verified,
    })
}

//! A `Db` on the simulated storage (`strata::io::sim`): the engine works the
//! same through the storage seam when no file is real, and what it
//! acknowledged as synced survives a simulated power loss.

use std::sync::Arc;
use strata::io::sim::SimStorage;
use strata::io::{FileClass, OpKind};
use strata::{Db, IoMode, Options, WriteBatch, WriteOptions};

/// Directly under the root, which always exists: creating `/a/db` syncs
/// `/a` but not `/`, so a power loss can take the whole database with `/a`.
const DIR: &str = "/db";

fn options(sim: &SimStorage) -> Options {
    Options {
        io_mode: IoMode::DirectRw,
        fallback_to_buffered: false,
        layer_size_bytes_max: strata::LAYER_BYTES_MIN,
        writer_buffer_bytes: 8192,
        delta_block_bytes: 1024,
        background_flush: false,
        storage: Some(Arc::new(sim.clone())),
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(20 + (i as usize * 37) % 900, i as u8);
    v
}

#[test]
fn a_db_on_the_simulated_storage_writes_flushes_reopens_and_reads() {
    let sim = SimStorage::new(1);
    let db = Db::open(DIR, options(&sim)).unwrap();
    for i in 0..400 {
        db.put(key(i), value(i), WriteOptions { sync: i % 50 == 0 })
            .unwrap();
    }
    db.sync().unwrap();
    db.flush().unwrap();
    let stats = db.stats();
    assert!(stats.delta_layers >= 1, "{stats:?}");
    assert!(stats.io.ops(FileClass::Log, OpKind::Sync) > 0);
    assert!(stats.io.bytes(FileClass::Delta, OpKind::Write) > 0);
    // Some in the log, some in delta layers.
    for i in 400..500 {
        db.put(key(i), value(i), WriteOptions::default()).unwrap();
    }
    db.delete(key(7), WriteOptions::default()).unwrap();
    let before: Vec<_> = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    db.close().unwrap();
    assert!(sim.file_paths().iter().any(|p| p.ends_with("MANIFEST")));

    let db = Db::open(DIR, options(&sim)).unwrap();
    assert_eq!(db.get(key(7)).unwrap(), None);
    for i in (0..500).filter(|&i| i != 7) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    let keys: Vec<Vec<u8>> = (0..500).step_by(13).map(key).collect();
    let got = db.multi_get(&keys).unwrap();
    for (k, v) in keys.iter().zip(got) {
        let i: u32 = std::str::from_utf8(&k[4..]).unwrap().parse().unwrap();
        assert_eq!(v, (i != 7).then(|| value(i)));
    }
    let after: Vec<_> = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(after, before);
}

#[test]
fn a_synced_write_survives_power_loss() {
    for seed in 0..32 {
        let sim = SimStorage::new(seed);
        let db = Db::open(DIR, options(&sim)).unwrap();
        let mut b = WriteBatch::new();
        b.put(b"synced-a", b"1");
        b.put(b"synced-b", value(2));
        let lsn = db.write(&b, WriteOptions { sync: true }).unwrap();
        // Later writes, not synced, may or may not be there.
        for i in 0..20 {
            db.put(key(i), value(i), WriteOptions::default()).unwrap();
        }
        let sim = sim.power_loss();
        drop(db); // its handles are dead: nothing it does reaches the storage
        let db = Db::open(DIR, options(&sim))
            .unwrap_or_else(|e| panic!("seed {seed}: reopen after power loss: {e}"));
        assert!(db.last_lsn() >= lsn, "seed {seed}");
        assert_eq!(db.get(b"synced-a").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(db.get(b"synced-b").unwrap(), Some(value(2)), "seed {seed}");
        // Whatever else came back is whole: a batch of one, its value intact.
        for i in 0..20 {
            if let Some(v) = db.get(key(i)).unwrap() {
                assert_eq!(v, value(i), "seed {seed} key {i}");
            }
        }
    }
}

//! `Db::multi_get_each` on real files, O_DIRECT, with both I/O engines:
//! every key handed over exactly once with the value `get` gives, the keys
//! the in-memory layer holds before any that needs a read, and the same
//! answers as `multi_get`.

use strata::{Db, IoEngine, IoMode, Options, WriteOptions};

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    vec![i as u8; 100 + (i as usize * 31) % 700]
}

#[test]
fn multi_get_each_hands_each_key_over_once_memory_first() {
    for engine in [IoEngine::Sync, IoEngine::IoUring] {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let db = Db::open(
            dir.path(),
            Options {
                io_mode: IoMode::DirectRw,
                io_engine: engine,
                block_cache_bytes: 0,
                ..Options::default()
            },
        )
        .unwrap();
        // Keys 0..3000 in two delta layers (updates in the second), then
        // 3000..3100 in the open in-memory layer; every seventh deleted.
        for i in 0..3000 {
            db.put(key(i), value(i), WriteOptions::default()).unwrap();
        }
        db.flush().unwrap();
        for i in (0..3000).step_by(3) {
            db.put(key(i), value(i + 1), WriteOptions::default())
                .unwrap();
        }
        for i in (0..3000).step_by(7) {
            db.delete(key(i), WriteOptions::default()).unwrap();
        }
        db.flush().unwrap();
        for i in 3000..3100 {
            db.put(key(i), value(i), WriteOptions::default()).unwrap();
        }
        // Layer keys and memory keys interleaved, absent keys among them.
        let ids: Vec<u32> = (0..200u32)
            .map(|n| match n % 4 {
                0 => 3000 + n / 4,
                1 => 5000 + n,
                _ => (n * 7919) % 3000,
            })
            .collect();
        let keys: Vec<Vec<u8>> = ids.iter().map(|&i| key(i)).collect();
        let mut order = Vec::new();
        let mut got = vec![None; keys.len()];
        db.multi_get_each(&keys, |i, v| {
            assert!(got[i].is_none(), "{engine:?}: key {i} handed over twice");
            got[i] = Some(v);
            order.push(i);
        })
        .unwrap();
        assert_eq!(order.len(), keys.len(), "{engine:?}: every key, once");
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(
                got[i].as_ref(),
                Some(&db.get(k).unwrap()),
                "{engine:?}: key {i}"
            );
        }
        let in_memory = ids.iter().filter(|&&i| (3000..3100).contains(&i)).count();
        assert!(
            order[..in_memory].iter().all(|&i| ids[i] >= 3000),
            "{engine:?}: the in-memory layer's keys come first: {order:?}"
        );
        let all = db.multi_get(&keys).unwrap();
        assert_eq!(all, got.into_iter().map(Option::unwrap).collect::<Vec<_>>());
        db.close().unwrap();
    }
}

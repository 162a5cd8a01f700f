//! The remote store's contract (`strata::remote::RemoteStore`), held by
//! every store the same way: the directory store always, and with the `s3`
//! feature the S3 store against a real S3-compatible server (moto's, from
//! PyPI: `scripts/test.sh` installs it) that each test starts on a free
//! port of 127.0.0.1 and stops after.
//!
//! The create-only race is the check the issue asks of any server before
//! strata uses it: many clients put one key create-only at once, exactly
//! one wins, and the object holds the winner's bytes.

use strata::remote::{DirRemote, PutMode, RemoteStore};
use strata::{Error, RemoteErrorKind};

fn kind(e: &Error) -> &RemoteErrorKind {
    match e {
        Error::Remote { kind, .. } => kind,
        other => panic!("not a remote error: {other}"),
    }
}

fn round_trip(store: &dyn RemoteStore) {
    let body: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    store
        .put("layers/a-1", body.clone().into(), PutMode::Create)
        .unwrap();
    store
        .put("layers/b-1", b"bee".to_vec().into(), PutMode::Create)
        .unwrap();
    store
        .put("index/0001", b"i".to_vec().into(), PutMode::Create)
        .unwrap();
    assert_eq!(store.get("layers/a-1").unwrap(), body);
    assert_eq!(
        store.get_range("layers/a-1", 4096..8192).unwrap(),
        body[4096..8192]
    );
    assert_eq!(
        store.get_range("layers/a-1", 9_999..10_000).unwrap(),
        body[9_999..]
    );
    assert!(store.get_range("layers/a-1", 9_000..10_001).is_err());

    let keys = |prefix: &str| -> Vec<(String, u64)> {
        store
            .list(prefix)
            .unwrap()
            .into_iter()
            .map(|o| (o.key, o.size))
            .collect()
    };
    assert_eq!(
        keys("layers/"),
        vec![
            ("layers/a-1".to_string(), 10_000),
            ("layers/b-1".to_string(), 3)
        ]
    );
    assert_eq!(keys("layers/b"), vec![("layers/b-1".to_string(), 3)]);
    assert_eq!(keys("").len(), 3);
    assert!(keys("nothing/").is_empty());

    store.delete("layers/a-1").unwrap();
    let e = store.get("layers/a-1").unwrap_err();
    assert_eq!(kind(&e), &RemoteErrorKind::NotFound, "{e}");
    let text = e.to_string();
    assert!(
        text.contains(store.url()) && text.contains("layers/a-1") && !text.contains('\n'),
        "{text}"
    );
    store.delete("layers/a-1").unwrap();
    assert_eq!(keys("layers/"), vec![("layers/b-1".to_string(), 3)]);
}

fn create_only(store: &dyn RemoteStore) {
    store
        .put("gen/0001", b"first".to_vec().into(), PutMode::Create)
        .unwrap();
    let e = store
        .put("gen/0001", b"second".to_vec().into(), PutMode::Create)
        .unwrap_err();
    assert_eq!(kind(&e), &RemoteErrorKind::AlreadyExists, "{e}");
    assert_eq!(store.get("gen/0001").unwrap(), b"first");
    store
        .put("gen/0001", b"third".to_vec().into(), PutMode::Overwrite)
        .unwrap();
    assert_eq!(store.get("gen/0001").unwrap(), b"third");
    for bad in ["", "/abs", "a//b", "../up", "a/.hidden", "with space"] {
        let e = store
            .put(bad, b"x".to_vec().into(), PutMode::Create)
            .unwrap_err();
        assert!(
            matches!(kind(&e), RemoteErrorKind::Invalid(_)),
            "{bad:?}: {e}"
        );
    }
}

/// Of `clients` threads putting one key create-only at once, exactly one
/// wins, every other is told `AlreadyExists`, and the object is the
/// winner's; `rounds` times.
fn race(store: &(dyn RemoteStore + 'static), rounds: usize, clients: usize) {
    for round in 0..rounds {
        let key = format!("race/{round:04}");
        let barrier = std::sync::Barrier::new(clients);
        let results: Vec<(usize, strata::Result<()>)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..clients)
                .map(|c| {
                    let (key, barrier) = (&key, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        (
                            c,
                            store.put(
                                key,
                                format!("client {c}").into_bytes().into(),
                                PutMode::Create,
                            ),
                        )
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<usize> = results
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(c, _)| *c)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        for (c, r) in &results {
            if let Err(e) = r {
                assert_eq!(kind(e), &RemoteErrorKind::AlreadyExists, "client {c}: {e}");
            }
        }
        assert_eq!(
            store.get(&key).unwrap(),
            format!("client {}", winners[0]).into_bytes()
        );
    }
}

/// `put_parts`: the parts in order become one object (a multipart upload
/// on S3: parts of at least 5 MiB but the last); one part is a plain put;
/// a part's error ends the put with that error and leaves no object; a
/// key put again in parts takes the new bytes (no condition is made).
fn put_in_parts(store: &dyn RemoteStore) {
    use strata::remote::Payload;
    let part = |seed: u8, len: usize| -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect()
    };
    let sizes = [6 << 20, 6 << 20, 1 << 20];
    let parts: Vec<Vec<u8>> = (0u8..).zip(sizes).map(|(s, n)| part(s, n)).collect();
    let mut given = parts.iter().map(|p| Ok(Payload::from(p.clone())));
    store.put_parts("layers/parts-1", &mut given).unwrap();
    assert_eq!(store.get("layers/parts-1").unwrap(), parts.concat());
    let at = (6 << 20) - 100;
    assert_eq!(
        store.get_range("layers/parts-1", at..at + 200).unwrap(),
        parts.concat()[at as usize..at as usize + 200]
    );

    // Parts that do not tell their count: the same object.
    let mut left = parts.clone().into_iter();
    let mut untold = std::iter::from_fn(|| left.next().map(|p| Ok(Payload::from(p))));
    store.put_parts("layers/untold-1", &mut untold).unwrap();
    assert_eq!(store.get("layers/untold-1").unwrap(), parts.concat());
    let mut one_untold = std::iter::from_fn({
        let mut given = false;
        move || (!std::mem::replace(&mut given, true)).then(|| Ok(b"alone".to_vec().into()))
    });
    store.put_parts("layers/alone-1", &mut one_untold).unwrap();
    assert_eq!(store.get("layers/alone-1").unwrap(), b"alone");

    let one = part(9, 3000);
    store
        .put_parts("layers/one-1", &mut std::iter::once(Ok(one.clone().into())))
        .unwrap();
    assert_eq!(store.get("layers/one-1").unwrap(), one);
    store
        .put_parts(
            "layers/one-1",
            &mut std::iter::once(Ok(b"again".to_vec().into())),
        )
        .unwrap();
    assert_eq!(store.get("layers/one-1").unwrap(), b"again");

    // The third part fails to be read: the put fails with its error, and
    // the key holds nothing.
    let mut failing = parts
        .iter()
        .take(2)
        .map(|p| Ok(Payload::from(p.clone())))
        .chain(std::iter::once(Err(Error::Internal(
            "the disk said no".into(),
        ))));
    let e = store
        .put_parts("layers/failed-1", &mut failing)
        .unwrap_err();
    assert!(e.to_string().contains("the disk said no"), "{e}");
    assert!(store.get("layers/failed-1").is_err());
    assert!(store
        .list("layers/failed")
        .unwrap()
        .iter()
        .all(|o| o.key != "layers/failed-1"));
}

fn dir_store() -> (tempfile::TempDir, DirRemote) {
    let dir = tempfile::tempdir().unwrap();
    let store = DirRemote::open(dir.path().join("bucket")).unwrap();
    (dir, store)
}

#[test]
fn dir_store_round_trip() {
    let (_dir, store) = dir_store();
    round_trip(&store);
}

/// The directory store writes each part as it comes into a temporary
/// file: none is left behind, the failed put's neither.
#[test]
fn dir_store_put_in_parts() {
    let (d, store) = dir_store();
    put_in_parts(&store);
    let layers = d.path().join("bucket").join("layers");
    let left: Vec<String> = std::fs::read_dir(&layers)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn dir_store_create_only() {
    let (_dir, store) = dir_store();
    create_only(&store);
}

#[test]
fn dir_store_create_only_race_has_one_winner() {
    let (_dir, store) = dir_store();
    race(&store, 20, 12);
}

#[test]
fn dir_store_skips_a_crashed_put_and_survives_reopen() {
    let (dir, store) = dir_store();
    store
        .put("layers/x", b"kept".to_vec().into(), PutMode::Create)
        .unwrap();
    // What a put killed before its link leaves: a temporary file.
    std::fs::write(dir.path().join("bucket/layers/.put-1-1"), b"half").unwrap();
    let store = DirRemote::open(dir.path().join("bucket")).unwrap();
    let keys: Vec<String> = store.list("").unwrap().into_iter().map(|o| o.key).collect();
    assert_eq!(keys, vec!["layers/x".to_string()]);
    assert_eq!(store.get("layers/x").unwrap(), b"kept");
}

#[cfg(feature = "s3")]
mod s3 {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};
    use strata::remote::{S3Config, S3Remote};

    /// A moto S3 server on 127.0.0.1, killed when dropped.
    struct Moto {
        child: Child,
        port: u16,
    }

    impl Drop for Moto {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn free_port() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    /// One HTTP/1.1 request without a body; the status line's code.
    fn http(port: u16, method: &str, path: &str) -> std::io::Result<u16> {
        let mut s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )?;
        let mut head = [0u8; 12];
        s.read_exact(&mut head)?;
        let text = String::from_utf8_lossy(&head);
        text.get(9..12)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {text:?}")))
    }

    /// moto's S3 server on 127.0.0.1 at the port given, serving one
    /// request at a time (see `Moto::start`).
    const MOTO_IN_TURN: &str = "import sys
from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
run_simple('127.0.0.1', int(sys.argv[1]), DomainDispatcherApplication(create_backend_app), threaded=False)
";

    impl Moto {
        /// Starts moto's server on a free port and creates bucket `strata`
        /// in it. One request at a time (`threaded=False`; `python3 -m
        /// moto.server` serves each on a thread of its own): moto checks a
        /// create-only put's condition and then writes, so two threads can
        /// both pass the check — its race check saw two winners of twelve
        /// on a busy machine. Served in turn, the condition holds.
        fn start() -> Moto {
            let python = std::env::var("STRATA_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
            for _attempt in 0..3 {
                let port = free_port();
                let child = Command::new(&python)
                    .args(["-c", MOTO_IN_TURN, &port.to_string()])
                    .env("MOTO_PORT", port.to_string())
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap_or_else(|e| {
                        panic!("cannot run {python} with moto's server ({e}): scripts/test.sh installs moto[server]")
                    });
                let mut moto = Moto { child, port };
                let deadline = Instant::now() + Duration::from_secs(30);
                while Instant::now() < deadline {
                    if let Ok(Some(status)) = moto.child.try_wait() {
                        panic!("moto's server exited ({status}): is moto[server] installed? scripts/test.sh installs it");
                    }
                    if let Ok(code) = http(port, "PUT", "/strata") {
                        assert_eq!(code, 200, "moto refused to create the bucket");
                        return moto;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                let _ = moto.child.kill(); // the port was taken meanwhile: another
            }
            panic!("moto's server did not come up on 127.0.0.1");
        }

        fn store(&self, prefix: &str) -> S3Remote {
            S3Remote::open(&S3Config {
                bucket: "strata".into(),
                prefix: prefix.into(),
                endpoint: Some(format!("http://127.0.0.1:{}", self.port)),
                region: Some("us-east-1".into()),
                access_key_id: Some("testing".into()),
                secret_access_key: Some("testing".into()),
                retry_timeout: Some(Duration::from_secs(2)),
            })
            .unwrap()
        }
    }

    #[test]
    fn s3_store_round_trip() {
        let moto = Moto::start();
        round_trip(&moto.store("db"));
        // A store at the bucket's root sees the prefix's objects as keys.
        let root = moto.store("");
        let keys: Vec<String> = root
            .list("db/")
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .collect();
        assert_eq!(
            keys,
            vec!["db/index/0001".to_string(), "db/layers/b-1".to_string()]
        );
    }

    #[test]
    fn s3_store_put_in_parts() {
        let moto = Moto::start();
        put_in_parts(&moto.store("db"));
    }

    #[test]
    fn s3_store_create_only() {
        let moto = Moto::start();
        create_only(&moto.store("db"));
    }

    /// The conditional-write race check of the server (the issue's: many
    /// clients create-only on one key, exactly one wins).
    #[test]
    fn s3_server_passes_the_create_only_race() {
        let moto = Moto::start();
        race(&moto.store("db"), 5, 12);
    }

    /// Writers opening one bucket at once take distinct generations.
    #[test]
    fn s3_writers_take_distinct_generations() {
        use strata::remote::generation::acquire;
        let moto = Moto::start();
        let stores: Vec<S3Remote> = (0..6).map(|_| moto.store("db")).collect();
        let mut gens: Vec<u64> = std::thread::scope(|s| {
            let hs: Vec<_> = stores
                .iter()
                .map(|store| s.spawn(move || acquire(store, "test").unwrap()))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        gens.sort_unstable();
        assert_eq!(gens, (1..=6).collect::<Vec<u64>>());
    }

    /// A database on the S3 store: synced, its disk lost, restored from
    /// the bucket into an empty directory.
    #[test]
    fn a_database_comes_back_from_the_bucket() {
        use std::sync::Arc;
        use strata::remote::Remote;
        use strata::{Db, Options, WriteOptions};
        let moto = Moto::start();
        let store: Arc<dyn RemoteStore> = Arc::new(moto.store("db"));
        let opts = || Options {
            remote: Some(Remote(Arc::clone(&store))),
            layer_size_bytes_max: 1 << 20,
            // Replaced objects go at once (no follower waits for them).
            remote_deletion_delay: std::time::Duration::ZERO,
            ..Options::default()
        };
        let tmp = tempfile::tempdir().unwrap();
        let value = |i: u32| vec![(i % 251) as u8; if i.is_multiple_of(5) { 6000 } else { 200 }];
        {
            let db = Db::open(tmp.path().join("a"), opts()).unwrap();
            for i in 0..3000u32 {
                db.put(format!("k{i:05}"), value(i), WriteOptions::default())
                    .unwrap();
            }
            db.sync_remote().unwrap();
            assert_eq!(
                db.stats().remote.unwrap().consistent_lsn,
                db.stats().last_lsn
            );
            // A compaction replaces the layers: once its index is in the
            // bucket, the objects it no longer lists are deleted, and the
            // bucket holds exactly what the newest index lists.
            let before: Vec<String> = store
                .list("layers/")
                .unwrap()
                .into_iter()
                .map(|o| o.key)
                .collect();
            db.compact().unwrap();
            db.sync_remote().unwrap();
            let started = std::time::Instant::now();
            while db.stats().remote.unwrap().unlisted_objects > 0 {
                assert!(started.elapsed().as_secs() < 20, "{:?}", db.stats().remote);
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            assert!(db.stats().remote.unwrap().deleted_objects > 0);
            let r = strata::remote::inspect::inspect_store(&*store, true).unwrap();
            assert!(r.orphans.is_empty() && r.missing.is_empty(), "{r:?}");
            let after: Vec<String> = store
                .list("layers/")
                .unwrap()
                .into_iter()
                .map(|o| o.key)
                .collect();
            assert!(
                before.iter().any(|k| !after.contains(k)),
                "{before:?} {after:?}"
            );
        }
        std::fs::remove_dir_all(tmp.path().join("a")).unwrap();
        let db = Db::open(tmp.path().join("b"), opts()).unwrap();
        for i in 0..3000u32 {
            assert_eq!(
                db.get(format!("k{i:05}")).unwrap(),
                Some(value(i)),
                "k{i:05}"
            );
        }
        assert_eq!(db.stats().remote.unwrap().generation, 2);
        // A read-only follower in a directory of its own, beside the
        // writer: it reads the bucket's database, and a refresh shows the
        // writer's next synced write.
        let follower = Db::open(
            tmp.path().join("f"),
            Options {
                remote_follower: true,
                // It moves when told (no background refresh).
                remote_follow_interval: None,
                ..opts()
            },
        )
        .unwrap();
        assert_eq!(follower.get("k00007").unwrap(), Some(value(7)));
        assert!(matches!(
            follower.put("x", "y", WriteOptions::default()),
            Err(strata::Error::ReadOnly { .. })
        ));
        db.put("k00007", "new", WriteOptions::default()).unwrap();
        db.sync_remote().unwrap();
        assert_eq!(follower.get("k00007").unwrap(), Some(value(7)));
        assert_eq!(
            follower.refresh_remote().unwrap(),
            db.stats().remote.unwrap().consistent_lsn
        );
        assert_eq!(
            follower.get("k00007").unwrap().as_deref(),
            Some(&b"new"[..])
        );
        assert!(!db.stats().remote.unwrap().fenced);
    }

    /// A layer damaged in its middle, on the real server, sent in parts
    /// (`remote_single_put_bytes_max` zero) of two 8 MiB parts (checked
    /// whole once both are read, while they go: the check fails at the
    /// end of the parts) and of five (checked on a helper thread as they
    /// go: it fails at the middle part): the multipart upload never
    /// completes; and read whole for one PUT (the default; a small layer
    /// is uploaded before it): checked before the PUT. The bucket holds no object of it; whole again, it uploads,
    /// the object the file byte for byte.
    #[test]
    fn a_damaged_layer_never_becomes_an_object_in_the_bucket() {
        let whole = strata::Options::default().remote_single_put_bytes_max;
        for (thousands, parts, single_put) in [(12u32, 2usize, 0), (36, 5, 0), (36, 5, whole)] {
            damaged_layer_upload(thousands, parts, single_put);
        }
    }

    /// A layer of `thousands` thousand values of 1000 bytes, of `parts`
    /// parts, damaged in its middle, uploaded with
    /// `remote_single_put_bytes_max` `single_put` (see above).
    fn damaged_layer_upload(thousands: u32, parts: usize, single_put: u64) {
        use std::sync::Arc;
        use strata::remote::Remote;
        use strata::{Db, Options, WriteBatch, WriteOptions};
        let moto = Moto::start();
        let store: Arc<dyn RemoteStore> = Arc::new(moto.store("db"));
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a");
        let local = Options {
            background_flush: false,
            ..Options::default()
        };
        {
            let db = Db::open(&dir, local.clone()).unwrap();
            // A small layer first (L0 goes oldest first): the large one is
            // not the first of the uploads, which goes in parts whatever
            // the limit.
            db.put(b"a-small-layer", b"1", WriteOptions::default())
                .unwrap();
            db.flush().unwrap();
            for chunk in 0..thousands {
                let mut b = WriteBatch::new();
                for i in 0..1000u32 {
                    b.put(format!("k{chunk:03}-{i:05}"), vec![(i % 253) as u8; 1000]);
                }
                db.write(&b, WriteOptions::default()).unwrap();
            }
            db.flush().unwrap();
        }
        let layer = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "delta"))
            .max_by_key(|p| std::fs::metadata(p).unwrap().len())
            .unwrap();
        let whole = std::fs::read(&layer).unwrap();
        assert_eq!(
            whole.len().div_ceil(8 << 20),
            parts,
            "{} bytes",
            whole.len()
        );
        let name = layer.file_name().unwrap().to_str().unwrap().to_string();
        let mut bad = whole.clone();
        bad[whole.len() / 2] ^= 0x10;
        std::fs::write(&layer, &bad).unwrap();
        let opts = Options {
            remote: Some(Remote(Arc::clone(&store))),
            remote_single_put_bytes_max: single_put,
            ..local
        };
        let layers = || -> Vec<String> {
            store
                .list("layers/")
                .unwrap()
                .into_iter()
                .map(|o| o.key)
                .filter(|k| k.contains(&name))
                .collect()
        };
        {
            let db = Db::open(&dir, opts.clone()).unwrap();
            let e = db
                .sync_remote_within(Duration::from_millis(1500))
                .unwrap_err();
            assert!(e.to_string().contains(&name), "{e}");
        }
        assert_eq!(layers(), Vec::<String>::new());
        std::fs::write(&layer, &whole).unwrap();
        Db::open(&dir, opts).unwrap().sync_remote().unwrap();
        let objects = layers();
        assert_eq!(objects.len(), 1, "{objects:?}");
        assert!(
            store.get(&objects[0]).unwrap() == whole,
            "the object differs"
        );
    }

    #[test]
    fn a_stopped_server_is_one_line_transport_error() {
        let moto = Moto::start();
        let store = moto.store("db");
        store
            .put("k", b"v".to_vec().into(), PutMode::Create)
            .unwrap();
        drop(moto);
        let e = store.get("k").unwrap_err();
        assert!(matches!(kind(&e), RemoteErrorKind::Transport(_)), "{e}");
        let text = e.to_string();
        assert!(
            text.starts_with("remote store s3://strata/db: get k: "),
            "{text}"
        );
        assert!(!text.contains('\n'), "{text}");
    }
}

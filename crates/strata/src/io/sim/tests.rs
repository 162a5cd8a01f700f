//! The simulator's own claims: what survives a power loss, what a fault
//! fails, what a corrupted read returns, and that all of it follows from
//! the seed.

use super::*;
use crate::error::InvalidInput;
use crate::io::AlignedBuf;

const SEEDS: u64 = 64;

fn opts(mode: IoMode) -> FileOptions {
    FileOptions {
        mode,
        class: FileClass::Log,
        ..FileOptions::default()
    }
}

fn errno(e: &Error) -> Option<i32> {
    match e {
        Error::Io { source, .. } => source.raw_os_error(),
        _ => None,
    }
}

/// `sectors` sectors, sector i filled with `fill(i)`, in aligned memory.
fn sectors(sectors: usize, fill: impl Fn(usize) -> u8) -> AlignedBuf {
    let mut buf = AlignedBuf::with_capacity(sectors * SECTOR_BYTES, SECTOR_BYTES);
    for i in 0..sectors {
        buf.extend_from_slice(&[fill(i); SECTOR_BYTES]);
    }
    buf
}

/// A file `/f` whose name and `durable` bytes are durable.
fn durable_file(sim: &SimStorage, durable: &[u8]) -> Arc<dyn StorageFile> {
    let f = sim
        .create(Path::new("/f"), &opts(IoMode::Buffered), &IoStats::new())
        .unwrap();
    f.write_all_at(durable, 0).unwrap();
    f.sync_data().unwrap();
    sim.sync_dir(Path::new("/")).unwrap();
    f
}

#[test]
fn unsynced_writes_may_vanish_after_power_loss() {
    let (mut vanished, mut kept) = (0, 0);
    for seed in 0..SEEDS {
        let sim = SimStorage::new(seed);
        let f = durable_file(&sim, b"");
        f.write_all_at(&[0xab; 4096], 0).unwrap();
        let after = sim.power_loss();
        let bytes = after.file_bytes("/f").expect("the name was synced");
        if bytes.is_empty() {
            vanished += 1;
        }
        if bytes == [0xab; 4096] {
            kept += 1;
        }
    }
    assert!(vanished > 0 && kept > 0, "vanished {vanished}, kept {kept}");
}

#[test]
fn synced_writes_survive_power_loss() {
    for seed in 0..SEEDS {
        let sim = SimStorage::new(seed);
        let f = durable_file(&sim, &[7; 3000]);
        f.write_all_at(&[9; 100], 3000).unwrap();
        f.sync_data().unwrap();
        // Unsynced writes after it, over it and past it, may do anything to
        // their own sectors only.
        f.write_all_at(&[1; 4096], 8192).unwrap();
        let after = sim.power_loss();
        let bytes = after.file_bytes("/f").unwrap();
        assert_eq!(&bytes[..3000], &[7; 3000][..], "seed {seed}");
        assert_eq!(&bytes[3000..3100], &[9; 100][..], "seed {seed}");
    }
}

#[test]
fn a_torn_write_keeps_whole_sectors() {
    const N: usize = 8;
    let mut mixed = 0;
    for seed in 0..SEEDS {
        let sim = SimStorage::new(seed);
        let f = durable_file(&sim, sectors(N, |i| i as u8).as_slice());
        // One unsynced write over every sector, not aligned to them.
        let new: Vec<u8> = (0..N * SECTOR_BYTES - 100)
            .map(|i| 100 + ((i + 50) / SECTOR_BYTES) as u8)
            .collect();
        f.write_all_at(&new, 50).unwrap();
        let bytes = sim.power_loss().file_bytes("/f").unwrap();
        assert_eq!(bytes.len(), N * SECTOR_BYTES, "seed {seed}");
        let mut olds = 0;
        for (i, sector) in bytes.chunks(SECTOR_BYTES).enumerate() {
            let (lo, hi) = (
                if i == 0 { 50 } else { 0 },
                if i == N - 1 { 462 } else { 512 },
            );
            let part = &sector[lo..hi];
            if part.iter().all(|&b| b == i as u8) {
                olds += 1;
            } else {
                assert!(
                    part.iter().all(|&b| b == 100 + i as u8),
                    "seed {seed}: sector {i} is neither old nor new"
                );
            }
            // Bytes of the sector outside the write are never touched.
            assert!(sector[..lo]
                .iter()
                .chain(&sector[hi..])
                .all(|&b| b == i as u8));
        }
        if olds > 0 && olds < N {
            mixed += 1;
        }
    }
    assert!(mixed > 0, "no seed tore the write");
}

#[test]
fn directory_entries_need_sync_dir() {
    let stats = IoStats::new();
    let o = opts(IoMode::Buffered);
    let (mut lost_create, mut lost_rename, mut lost_remove) = (0, 0, 0);
    for seed in 0..SEEDS {
        let sim = SimStorage::new(seed);
        sim.create_dir_all(Path::new("/d")).unwrap();
        sim.sync_dir(Path::new("/")).unwrap();
        for name in ["/d/old", "/d/gone"] {
            let f = sim.create(Path::new(name), &o, &stats).unwrap();
            f.write_all_at(b"x", 0).unwrap();
            f.sync_data().unwrap();
        }
        sim.sync_dir(Path::new("/d")).unwrap();
        // Synced data, unsynced names.
        let f = sim.create(Path::new("/d/new"), &o, &stats).unwrap();
        f.write_all_at(b"y", 0).unwrap();
        f.sync_data().unwrap();
        sim.rename(Path::new("/d/old"), Path::new("/d/renamed"))
            .unwrap();
        sim.remove_file(Path::new("/d/gone")).unwrap();
        let after = sim.power_loss();
        lost_create += after.file_bytes("/d/new").is_none() as u32;
        lost_rename += after.file_bytes("/d/old").is_some() as u32;
        lost_remove += after.file_bytes("/d/gone").is_some() as u32;
        assert!(
            after.file_bytes("/d/old").is_some() != after.file_bytes("/d/renamed").is_some(),
            "seed {seed}: a rename is atomic"
        );

        // The same, synced: everything stays.
        let sim = after;
        let f = sim.create(Path::new("/d/new2"), &o, &stats).unwrap();
        f.write_all_at(b"z", 0).unwrap();
        f.sync_data().unwrap();
        sim.sync_dir(Path::new("/d")).unwrap();
        let after = sim.power_loss();
        assert_eq!(after.file_bytes("/d/new2").as_deref(), Some(&b"z"[..]));
    }
    assert!(
        lost_create > 0 && lost_rename > 0 && lost_remove > 0,
        "{lost_create} {lost_rename} {lost_remove}"
    );
}

#[test]
fn a_failed_sync_leaves_its_writes_volatile_for_good() {
    let mut lost = 0;
    for seed in 0..SEEDS {
        let sim = SimStorage::new(seed);
        let f = durable_file(&sim, b"");
        f.write_all_at(&[5; 1024], 0).unwrap();
        sim.inject(Fault::once(sim.ops() + 1, FaultError::Eio));
        assert_eq!(errno(&f.sync_data().unwrap_err()), Some(libc::EIO));
        f.sync_data().unwrap();
        lost += (sim.power_loss().file_bytes("/f").unwrap() != [5; 1024]) as u32;
    }
    assert!(lost > 0);
}

#[test]
fn one_fault_fails_only_the_nth_operation_and_changes_nothing() {
    let sim = SimStorage::new(1);
    let f = durable_file(&sim, b"abc");
    let n = sim.ops() + 2;
    sim.inject(Fault::once(n, FaultError::Eio));
    f.write_all_at(b"1", 0).unwrap();
    let err = f.write_all_at(b"2", 1).unwrap_err();
    assert_eq!(errno(&err), Some(libc::EIO));
    assert!(err.to_string().contains("/f"), "{err}");
    assert_eq!(sim.ops(), n, "a failed operation is counted");
    f.write_all_at(b"3", 2).unwrap();
    assert_eq!(sim.file_bytes("/f").unwrap(), b"1b3");
}

#[test]
fn persistent_eio_fails_every_later_operation() {
    let sim = SimStorage::new(2);
    let f = durable_file(&sim, b"abc");
    sim.inject(Fault::from_op(sim.ops() + 1, FaultError::Eio));
    let mut buf = [0u8; 3];
    for _ in 0..3 {
        assert_eq!(errno(&f.read_at(&mut buf, 0).unwrap_err()), Some(libc::EIO));
        assert_eq!(errno(&f.sync_data().unwrap_err()), Some(libc::EIO));
        assert_eq!(
            errno(&sim.list_dir(Path::new("/")).unwrap_err()),
            Some(libc::EIO)
        );
    }
    sim.clear_faults();
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), 3);
}

#[test]
fn persistent_enospc_fails_every_later_write() {
    let sim = SimStorage::new(3);
    let stats = IoStats::new();
    let f = durable_file(&sim, b"abc");
    sim.inject(Fault::from_op(sim.ops() + 1, FaultError::Enospc));
    let o = opts(IoMode::Buffered);
    for i in 0..3 {
        assert_eq!(
            errno(&f.write_all_at(b"x", i).unwrap_err()),
            Some(libc::ENOSPC)
        );
        assert_eq!(
            errno(&sim.create(Path::new("/g"), &o, &stats).unwrap_err()),
            Some(libc::ENOSPC)
        );
        assert_eq!(
            errno(&sim.create_dir_all(Path::new("/d")).unwrap_err()),
            Some(libc::ENOSPC)
        );
        assert_eq!(errno(&f.set_len(1 << 20).unwrap_err()), Some(libc::ENOSPC));
    }
    // Reads, syncs, shrinking and removing still work.
    let mut buf = [0u8; 3];
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), 3);
    assert_eq!(&buf, b"abc");
    f.sync_data().unwrap();
    sim.sync_dir(Path::new("/")).unwrap();
    f.set_len(2).unwrap();
    sim.remove_file(Path::new("/f")).unwrap();
}

#[test]
fn the_operation_counter_counts_every_call() {
    let sim = SimStorage::new(4);
    let stats = IoStats::new();
    let o = opts(IoMode::Buffered);
    let mut expected = 0;
    let mut step = |ops: u64, what: &str| {
        expected += ops;
        assert_eq!(sim.ops(), expected, "after {what}");
    };
    sim.create_dir_all(Path::new("/d")).unwrap();
    step(1, "create_dir_all");
    let f = sim.create(Path::new("/d/f"), &o, &stats).unwrap();
    step(1, "create");
    f.write_all_at(b"abc", 0).unwrap();
    step(1, "write");
    f.read_at(&mut [0u8; 3], 0).unwrap();
    step(1, "read");
    f.sync_data().unwrap();
    step(1, "sync_data");
    f.set_len(2).unwrap();
    step(1, "set_len");
    f.len().unwrap();
    step(1, "len");
    sim.open(Path::new("/d/f"), &o, &stats).unwrap();
    step(1, "open");
    sim.entry_kind(Path::new("/d")).unwrap();
    step(1, "entry_kind");
    sim.list_dir(Path::new("/d")).unwrap();
    step(1, "list_dir");
    sim.rename(Path::new("/d/f"), Path::new("/d/g")).unwrap();
    step(1, "rename");
    sim.sync_dir(Path::new("/d")).unwrap();
    step(1, "sync_dir");
    let lock = sim.lock(Path::new("/d/LOCK")).unwrap();
    step(1, "lock");
    sim.remove_file(Path::new("/d/g")).unwrap();
    step(1, "remove_file");
    drop(lock);
    let reqs: [crate::io::ReadRequest<'_>; 2] = [(&*f, 0, 1), (&*f, 1, 1)];
    sim.read_batch(&reqs).unwrap();
    step(2, "read_batch of two reads");
    assert_eq!(sim.reads(), 3);
}

#[test]
fn power_loss_outcomes_follow_from_the_seed() {
    let run = |seed: u64| {
        let sim = SimStorage::new(seed);
        let stats = IoStats::new();
        let mut names = Vec::new();
        for i in 0..8u8 {
            let name = format!("/f{i}");
            let f = sim
                .create(Path::new(&name), &opts(IoMode::Buffered), &stats)
                .unwrap();
            f.write_all_at(&vec![i; 700 * (i as usize + 1)], 0).unwrap();
            if i % 3 == 0 {
                f.sync_data().unwrap();
            }
            names.push(name);
        }
        let after = sim.power_loss();
        names
            .iter()
            .map(|n| after.file_bytes(n))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(42), run(42));
    assert!((0..8).any(|s| run(s) != run(s + 1)));
}

#[test]
fn handles_from_before_a_power_loss_fail_after_it() {
    let sim = SimStorage::new(5);
    let f = durable_file(&sim, b"abc");
    let lock = sim.lock(Path::new("/LOCK")).unwrap();
    let after = sim.power_loss();
    assert!(f.write_all_at(b"x", 0).is_err());
    assert!(f.read_at(&mut [0u8; 3], 0).is_err());
    assert!(f.sync_data().is_err());
    assert!(sim.list_dir(Path::new("/")).is_err());
    assert!(sim
        .create(Path::new("/g"), &opts(IoMode::Buffered), &IoStats::new())
        .is_err());
    // The lock died with the machine; the new handle works.
    let again = after.lock(Path::new("/LOCK")).unwrap();
    drop(lock);
    assert!(after.lock(Path::new("/LOCK")).is_err(), "still held");
    drop(again);
    after.lock(Path::new("/LOCK")).unwrap();
    let g = after
        .open(Path::new("/f"), &opts(IoMode::Buffered), &IoStats::new())
        .unwrap();
    let mut buf = [0u8; 3];
    assert_eq!(g.read_at(&mut buf, 0).unwrap(), 3);
    assert_eq!(&buf, b"abc");
}

#[test]
fn corrupted_reads_change_what_is_returned_not_what_is_stored() {
    let stored: Vec<u8> = (0..16 * SECTOR_BYTES)
        .map(|i| (i / SECTOR_BYTES) as u8 ^ (i as u8).rotate_left(3))
        .collect();
    for seed in 0..SEEDS {
        for kind in [
            CorruptionKind::BitFlip,
            CorruptionKind::ZeroSector,
            CorruptionKind::Misdirected,
        ] {
            let sim = SimStorage::new(seed);
            let f = durable_file(&sim, &stored);
            let (offset, len) = (3 * SECTOR_BYTES, 4 * SECTOR_BYTES);
            sim.set_read_corruption(ReadCorruption {
                at_read: Some(sim.reads() + 1),
                one_in_reads: None,
                kind: Some(kind),
            });
            let mut got = vec![0u8; len];
            assert_eq!(f.read_at(&mut got, offset as u64).unwrap(), len);
            let want = &stored[offset..offset + len];
            let diff: Vec<usize> = (0..len).filter(|&i| got[i] != want[i]).collect();
            match kind {
                CorruptionKind::BitFlip => {
                    assert_eq!(diff.len(), 1, "seed {seed}");
                    assert_eq!((got[diff[0]] ^ want[diff[0]]).count_ones(), 1);
                }
                CorruptionKind::ZeroSector => {
                    assert!(!diff.is_empty(), "seed {seed}");
                    let sector = diff[0] / SECTOR_BYTES;
                    assert!(got[sector * SECTOR_BYTES..(sector + 1) * SECTOR_BYTES]
                        .iter()
                        .all(|&b| b == 0));
                    assert!(diff.iter().all(|&i| i / SECTOR_BYTES == sector));
                }
                CorruptionKind::Misdirected => {
                    // The bytes of an offset up to 8 sectors away, zeros past the end.
                    let at = |o: usize| -> Vec<u8> {
                        (o..o + len)
                            .map(|i| stored.get(i).copied().unwrap_or(0))
                            .collect()
                    };
                    let found = (1..=8).any(|k| {
                        let shift = k * SECTOR_BYTES;
                        (offset >= shift && got == at(offset - shift)) || got == at(offset + shift)
                    });
                    assert!(found, "seed {seed}: not the bytes of another offset");
                    assert_ne!(&got[..], want, "seed {seed}");
                }
            }
            assert_eq!(sim.corrupted_reads(), 1);
            assert_eq!(sim.file_bytes("/f").unwrap(), stored, "stored bytes intact");
            f.read_at(&mut got, offset as u64).unwrap();
            assert_eq!(&got[..], want, "only the chosen read is corrupted");
        }
    }
}

#[test]
fn corruption_by_chance_hits_about_one_read_in_n() {
    let sim = SimStorage::new(6);
    let f = durable_file(&sim, &[1; 4096]);
    sim.set_read_corruption(ReadCorruption {
        one_in_reads: Some(10),
        ..ReadCorruption::default()
    });
    let mut buf = [0u8; 4096];
    for _ in 0..1000 {
        f.read_at(&mut buf, 0).unwrap();
    }
    let hit = sim.corrupted_reads();
    assert!((50..200).contains(&hit), "{hit} of 1000");
}

#[test]
fn direct_io_must_be_aligned_like_o_direct() {
    let sim = SimStorage::new(7);
    let stats = IoStats::new();
    let f = sim
        .create(Path::new("/f"), &opts(IoMode::DirectRw), &stats)
        .unwrap();
    assert_eq!(f.alignment(), SECTOR_BYTES);
    let buf = sectors(2, |i| i as u8);
    f.write_all_at(buf.as_slice(), 0).unwrap();
    for (data, offset) in [
        (&buf.as_slice()[..100], 0),
        (buf.as_slice(), 100),
        (&buf.as_slice()[1..SECTOR_BYTES + 1], 0),
    ] {
        let err = f.write_all_at(data, offset).unwrap_err();
        assert!(
            matches!(err, Error::InvalidInput(InvalidInput::Unaligned { .. })),
            "{err}"
        );
    }
    let mut read = AlignedBuf::zeroed(SECTOR_BYTES, SECTOR_BYTES);
    assert!(f.read_at(&mut read.spare_capacity_full()[..10], 0).is_err());
    assert_eq!(f.read_range(10, 600).unwrap(), &buf.as_slice()[10..610]);
    // Buffered files take any alignment; a larger alignment may be asked for.
    let g = sim
        .create(Path::new("/g"), &opts(IoMode::Buffered), &stats)
        .unwrap();
    g.write_all_at(b"abc", 1).unwrap();
    let big = FileOptions {
        alignment_bytes: Some(4096),
        ..opts(IoMode::DirectRw)
    };
    assert_eq!(
        sim.create(Path::new("/h"), &big, &stats)
            .unwrap()
            .alignment(),
        4096
    );
    let small = FileOptions {
        alignment_bytes: Some(256),
        ..opts(IoMode::DirectRw)
    };
    assert!(sim.create(Path::new("/i"), &small, &stats).is_err());
}

#[test]
fn refused_direct_io_falls_back_or_fails_like_tmpfs() {
    let sim = SimStorage::new(8);
    sim.set_direct_io_supported(false);
    let stats = IoStats::new();
    let strict = FileOptions {
        fallback_to_buffered: false,
        ..opts(IoMode::DirectRw)
    };
    assert!(matches!(
        sim.create(Path::new("/f"), &strict, &stats).unwrap_err(),
        Error::DirectIoUnsupported { .. }
    ));
    let lenient = FileOptions {
        fallback_to_buffered: true,
        ..strict
    };
    let f = sim.create(Path::new("/f"), &lenient, &stats).unwrap();
    assert_eq!(f.mode(), IoMode::Buffered);
}

#[test]
fn stats_count_reads_writes_and_syncs_by_class() {
    let sim = SimStorage::new(9);
    let stats = IoStats::new();
    let f = sim
        .create(Path::new("/f"), &opts(IoMode::Buffered), &stats)
        .unwrap();
    f.write_all_at(&[1; 100], 0).unwrap();
    f.sync_data().unwrap();
    f.read_range(0, 40).unwrap();
    let s = stats.snapshot();
    assert_eq!(s.bytes(FileClass::Log, OpKind::Write), 100);
    assert_eq!(s.ops(FileClass::Log, OpKind::Sync), 1);
    assert_eq!(s.bytes(FileClass::Log, OpKind::Read), 40);
}

#[test]
fn unlinked_files_stay_readable_through_open_handles() {
    let sim = SimStorage::new(10);
    let f = durable_file(&sim, b"abc");
    sim.remove_file(Path::new("/f")).unwrap();
    assert!(sim.file_bytes("/f").is_none());
    assert_eq!(f.read_range(0, 3).unwrap(), b"abc");
    let inodes = sim.state().inodes.len();
    drop(f);
    sim.sync_dir(Path::new("/")).unwrap();
    assert_eq!(
        sim.state().inodes.len(),
        inodes - 1,
        "freed once unreferenced"
    );
}

use super::*;
use crate::batch::WriteBatch;
use crate::io::sim::SimStorage;
use crate::io::{
    BufferedWriter, FileClass, FileOptions, IoEngine, IoMode, IoStats, ShutdownMode, Storage,
};
use crate::layer::delta::reader::DeltaLayerReader;
use crate::layer::delta::writer::DeltaLayerWriter;
use crate::layer::file::LayerFile;
use crate::log::record::encode_log_header;
use crate::manifest::{delta_name, LayerDesc};
use crate::table_cache::{LayerIo, OpenReaders};
use crate::types::ValueKind;
use std::ops::Bound;
use std::path::PathBuf;

pub(super) struct Fixture {
    pub(super) storage: SimStorage,
    pub(super) stats: IoStats,
    pub(super) io: Arc<LayerIo>,
}

fn opts(class: FileClass) -> FileOptions {
    FileOptions {
        mode: IoMode::Buffered,
        engine: IoEngine::Sync,
        class,
        fallback_to_buffered: false,
        alignment_bytes: None,
    }
}

impl Fixture {
    pub(super) fn new() -> Fixture {
        let storage = SimStorage::new(7);
        storage.create_dir_all(&PathBuf::from("/db")).unwrap();
        let stats = IoStats::new();
        let io = Arc::new(LayerIo {
            storage: Arc::new(storage.clone()),
            dir: PathBuf::from("/db"),
            opts: opts(FileClass::Delta),
            stats: stats.clone(),
            cache: None,
            point_reads: Arc::default(),
            readers: OpenReaders::new(0),
        });
        Fixture { storage, stats, io }
    }

    /// An L0 layer file holding a Put of each (key, lsn).
    pub(super) fn disk(&self, id: u64, entries: &[(&str, Lsn)]) -> Arc<Layer> {
        self.run_file(id, Level::L0, (0, 0), entries, None)
    }

    /// A layer file of `level` holding a Put of each (key, lsn): its
    /// LSNs `lsns` (an L1 or image layer's; an L0 layer's are its
    /// entries'), and an image's `cover` (keys from its `.0`, to its
    /// `.1`; "" for no bound).
    pub(super) fn run_file(
        &self,
        id: u64,
        level: Level,
        lsns: (Lsn, Lsn),
        entries: &[(&str, Lsn)],
        cover: Option<(&str, &str)>,
    ) -> Arc<Layer> {
        let path = PathBuf::from("/db").join(delta_name(id));
        let file = self
            .storage
            .create(&path, &opts(FileClass::Delta), &self.stats)
            .unwrap();
        let sink = BufferedWriter::with_shared(file, 1 << 16, 0).unwrap();
        let mut w = DeltaLayerWriter::new(sink, 4096).unwrap();
        let mut sorted = entries.to_vec();
        sorted.sort();
        for (k, lsn) in sorted {
            w.add(k.as_bytes(), lsn, ValueKind::Put, b"v").unwrap();
        }
        let (sink, summary) = w.finish().unwrap();
        let file = sink.finish(ShutdownMode::PadThenTruncate).unwrap();
        let reader = DeltaLayerReader::open(LayerFile {
            file,
            len: summary.file_bytes,
            stats: self.stats.clone(),
        })
        .unwrap();
        let mut desc = LayerDesc::from_summary(id, reader.summary());
        if level != Level::L0 {
            (desc.level, desc.lsn_min, desc.lsn_max) = (level, lsns.0, lsns.1);
        }
        let bound = |k: &str, b: fn(Vec<u8>) -> Bound<Vec<u8>>| match k {
            "" => Bound::Unbounded,
            k => b(k.as_bytes().to_vec()),
        };
        desc.cover = cover.map(|(start, end)| Cover {
            start: bound(start, Bound::Included),
            end: bound(end, Bound::Excluded),
        });
        Layer::with_reader(desc, Arc::clone(&self.io), reader)
    }

    /// An in-memory layer with one batch per (key, lsn).
    pub(super) fn memory(&self, id: u64, writes: &[(&str, Lsn)]) -> Arc<InMemoryLayer> {
        let path = PathBuf::from(format!("/db/{id}.log"));
        let file = self
            .storage
            .create(&path, &opts(FileClass::Log), &self.stats)
            .unwrap();
        let mut writer = BufferedWriter::with_shared(file, 1 << 16, 0).unwrap();
        writer.write(&encode_log_header(id, None)).unwrap();
        let layer = InMemoryLayer::new_open(id, writer, 1 << 20, 1 << 20, &self.stats, None);
        for (k, lsn) in writes {
            let mut b = WriteBatch::new();
            b.put(k, b"v");
            layer.append(&b, *lsn).unwrap();
        }
        Arc::new(layer)
    }
}

fn id(c: Candidate<'_>) -> u64 {
    match c {
        Candidate::Memory(m) => m.file_id,
        Candidate::Disk(d) => d.desc.id,
    }
}

/// The layers a point read of `key` visits.
fn ids(v: &Version, key: &[u8], lsn: Lsn) -> Vec<u64> {
    v.candidates(key, lsn).map(id).collect()
}

/// The layers a scan of `s..e` visits.
fn range_ids(v: &Version, s: Bound<&[u8]>, e: Bound<&[u8]>, lsn: Lsn) -> Vec<u64> {
    let span = Span::of_range(s, e);
    v.upper(lsn, move |l| l.keys().meets(&span))
        .map(id)
        .chain(v.run_layers(span, lsn).into_iter().map(|(l, _)| l.desc.id))
        .collect()
}

#[test]
fn layers_out_of_lsn_order_are_refused() {
    let f = Fixture::new();
    let (a, b) = (f.disk(1, &[("a", 1), ("b", 5)]), f.disk(2, &[("c", 5)]));
    let open = f.memory(3, &[]);
    // Overlapping LSNs between two L0 layers.
    let err = Version::new(Arc::clone(&open), vec![], vec![a.clone(), b.clone()]);
    assert!(matches!(err, Err(Error::Internal(ref m)) if m.contains("layer 2 starts at LSN 5")));
    // L0 older than it says.
    let (c, d) = (f.disk(4, &[("a", 10)]), f.disk(5, &[("a", 9)]));
    assert!(Version::new(Arc::clone(&open), vec![], vec![c.clone(), d.clone()]).is_err());
    assert!(Version::new(Arc::clone(&open), vec![], vec![d, c.clone()]).is_ok());
    // A frozen layer below L0.
    let frozen = f.memory(6, &[("x", 3)]);
    assert!(Version::new(Arc::clone(&open), vec![frozen], vec![c.clone()]).is_err());
    // The open layer below a frozen one.
    let (frozen, low_open) = (f.memory(7, &[("x", 20)]), f.memory(8, &[("y", 19)]));
    assert!(Version::new(low_open, vec![frozen], vec![c]).is_err());
}

#[test]
fn candidates_are_newest_first_and_filtered_by_key_range_and_lsn() {
    let f = Fixture::new();
    let l0 = vec![
        f.disk(1, &[("b", 1), ("d", 2)]),
        f.disk(2, &[("a", 3), ("c", 4)]),
        f.disk(3, &[("e", 5), ("f", 6)]),
    ];
    let v = Version::new(f.memory(5, &[("z", 8)]), vec![f.memory(4, &[("z", 7)])], l0).unwrap();
    // Memory layers always, newest first; files by key range and LSN.
    assert_eq!(ids(&v, b"c", 10), [5, 4, 2, 1]);
    assert_eq!(ids(&v, b"e", 10), [5, 4, 3]);
    assert_eq!(ids(&v, b"c", 2), [5, 4, 1]);
    assert_eq!(ids(&v, b"0", 10), [5, 4]);
    let range = |s, e| range_ids(&v, s, e, 10);
    assert_eq!(range(Bound::Excluded(b"d"), Bound::Unbounded), [5, 4, 3]);
    assert_eq!(
        range(Bound::Included(b"c"), Bound::Excluded(b"e")),
        [5, 4, 2, 1]
    );
    assert_eq!(
        range(Bound::Included(b"d"), Bound::Excluded(b"e")),
        [5, 4, 1]
    );
    assert_eq!(range(Bound::Unbounded, Bound::Excluded(b"b")), [5, 4, 2]);
}

#[test]
fn an_image_answers_for_its_cover_and_leaves_the_rest_to_older_runs() {
    let f = Fixture::new();
    let (l1, img) = (Level::L1, Level::Image);
    // Oldest first: an L1 run over a..z (two files), an image at 20 of
    // "m" on, an L1 run at 21..30 over c..p, an image at 40 of ..."d".
    let layers = vec![
        f.run_file(1, l1, (1, 10), &[("a", 1), ("f", 2)], None),
        f.run_file(2, l1, (1, 10), &[("n", 3), ("z", 4)], None),
        f.run_file(3, img, (20, 20), &[("n", 20)], Some(("m", ""))),
        f.run_file(4, l1, (21, 30), &[("c", 21), ("p", 22)], None),
        f.run_file(5, img, (40, 40), &[], Some(("", "d"))),
    ];
    let v = Version::new(f.memory(9, &[]), vec![], layers).unwrap();
    assert_eq!(v.runs.len(), 4);
    // A point read stops at the first image whose cover holds the key.
    assert_eq!(ids(&v, b"a", 50), [9, 5]);
    assert_eq!(ids(&v, b"f", 50), [9, 4, 1]);
    assert_eq!(ids(&v, b"p", 50), [9, 4, 3]);
    assert_eq!(ids(&v, b"z", 50), [9, 3]);
    // Below an image's LSN, it is not there.
    assert_eq!(ids(&v, b"a", 39), [9, 1]);
    assert_eq!(ids(&v, b"z", 19), [9, 2]);
    // A scan: each run layer with the newer images' covers that meet
    // it; a layer whose part of the range they cover whole is left out.
    let span = Span::ALL;
    let masks: Vec<(u64, Vec<Cover>)> = v
        .run_layers(span, 50)
        .into_iter()
        .map(|(l, m)| (l.desc.id, m))
        .collect();
    let cover = |s: Bound<&str>, e: Bound<&str>| Cover {
        start: s.map(|k| k.as_bytes().to_vec()),
        end: e.map(|k| k.as_bytes().to_vec()),
    };
    let upto_d = cover(Bound::Unbounded, Bound::Excluded("d"));
    // (File 2, n..z, is all inside the image at 20: left out.)
    assert_eq!(
        masks,
        [(4, vec![upto_d.clone()]), (3, vec![]), (1, vec![upto_d])]
    );
    let from = |k: &'static [u8]| range_ids(&v, Bound::Included(k), Bound::Unbounded, 50);
    assert_eq!(from(b"e"), [9, 4, 3, 1]);
    assert_eq!(from(b"g"), [9, 4, 3]);
    // Below the image at 20, file 2 is read, with nothing masked.
    let at_19: Vec<(u64, Vec<Cover>)> = v
        .run_layers(Span::of_range(Bound::Included(b"m"), Bound::Unbounded), 19)
        .into_iter()
        .map(|(l, m)| (l.desc.id, m))
        .collect();
    assert_eq!(at_19, [(2, vec![])]);
    // Covers of one image run that overlap are refused.
    let clash = vec![
        f.run_file(6, img, (60, 60), &[("b", 60)], Some(("", "c"))),
        f.run_file(7, img, (60, 60), &[("c", 60)], Some(("bb", ""))),
    ];
    assert!(Version::new(f.memory(10, &[]), vec![], clash).is_err());
    // As are keys outside an image's cover.
    let outside = vec![f.run_file(8, img, (60, 60), &[("q", 60)], Some(("", "q")))];
    assert!(Version::new(f.memory(11, &[]), vec![], outside).is_err());
}

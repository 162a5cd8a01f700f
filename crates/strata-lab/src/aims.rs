//! The aims an experiment holds strata to, as data: what is measured
//! (a figure of strata's, or strata against another engine, the device
//! line or a published figure), the bound it must stay within, and the
//! figures of the run. Each experiment checks its own
//! ([`crate::experiment::Experiment::aims`]); this module owns their prose
//! and the verdict.
//!
//! Where aims live: in each experiment's results, the `aims` array
//! ([`crate::results::ExperimentResult::aims`]) holds one [`Aim`] per
//! claim — the [`Claim`] with its figures, its verdict and its text — and
//! the report's summary reads them from there. The run also writes each as
//! a note (`aim met: …` / `aim not met: …`) for people reading the JSON;
//! [`split_note`] reads those back only for results written before the
//! `aims` array existed.
//!
//! A claim may also be *not judged* ([`Claim::NotJudged`]): its figure is
//! there, but it is not like for like (a read figure made of cache hits,
//! LAB.md), so it counts neither as met nor as not met.
//!
//! Invariants: the verdict ([`Claim::verdict`]) is computed from the figures
//! and the bound; an [`Aim`] stores it beside them for readers of the JSON,
//! made by [`Aim::new`] only, and [`Aim::check`] verifies it against the
//! figures when results are loaded. [`Claim::note`] is the only writer of an
//! aim's note and [`split_note`] its only reader. A claim's figures are
//! finite (they come from rows' metrics, which are), so the JSON holds
//! numbers, never `null`. Pure functions, no I/O.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How the lab writes an aim's verdict at the start of a note.
pub const AIM_MET_PREFIX: &str = "aim met:";
pub const AIM_NOT_MET_PREFIX: &str = "aim not met:";
pub const AIM_NOT_JUDGED_PREFIX: &str = "aim not judged:";

/// What the run says of an aim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Met,
    NotMet,
    /// The figure is not like for like (see [`Claim::NotJudged`]): it
    /// counts for nothing.
    NotJudged,
}

impl Verdict {
    /// The verdict of a judged aim.
    pub fn of_met(met: bool) -> Verdict {
        if met {
            Verdict::Met
        } else {
            Verdict::NotMet
        }
    }

    /// The prefix of the aim's note.
    pub fn prefix(self) -> &'static str {
        match self {
            Verdict::Met => AIM_MET_PREFIX,
            Verdict::NotMet => AIM_NOT_MET_PREFIX,
            Verdict::NotJudged => AIM_NOT_JUDGED_PREFIX,
        }
    }

    /// As a word (`met`, `not met`, `not judged`).
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::NotMet => "not met",
            Verdict::NotJudged => "not judged",
        }
    }
}

/// The bound a figure or ratio must stay within (inclusive). In the JSON:
/// `{"at_least": 0.9}` or `{"at_most": 2.2}`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    AtLeast(f64),
    AtMost(f64),
}

impl Bound {
    pub fn holds(self, value: f64) -> bool {
        match self {
            Bound::AtLeast(min) => value >= min,
            Bound::AtMost(max) => value <= max,
        }
    }

    fn is_finite(self) -> bool {
        match self {
            Bound::AtLeast(v) | Bound::AtMost(v) => v.is_finite(),
        }
    }

    /// `value` with `decimals` decimals, or with as many more (up to
    /// `SHOWN_DECIMALS_MAX`) as it takes for the figure shown to fall on
    /// the side of the bound the figure itself does: a ratio of 0.8968
    /// against `≥ 0.9` reads 0.897, not 0.90 beside "not met".
    pub fn show(self, value: f64, decimals: usize) -> String {
        let mut d = decimals;
        loop {
            let shown = format!("{value:.d$}");
            let same_side = shown
                .parse::<f64>()
                .map_or(true, |s| self.holds(s) == self.holds(value));
            if same_side || d >= SHOWN_DECIMALS_MAX {
                return shown;
            }
            d += 1;
        }
    }
}

/// Most decimals [`Bound::show`] gives a figure.
const SHOWN_DECIMALS_MAX: usize = 6;

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::AtLeast(min) => write!(f, "≥ {min}"),
            Bound::AtMost(max) => write!(f, "≤ {max}"),
        }
    }
}

/// What strata's figure is compared with. In the JSON: `{"engine":
/// "RocksDB"}`, `{"device": …}` or `{"published": …}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reference {
    /// Another engine measured in the same run; its name as the prose
    /// says it (`io_uring's`, `RocksDB`, `every peer`).
    Engine(String),
    /// The device line measured in the same run (`the device write line`).
    Device(String),
    /// A figure published elsewhere, as the prose says it.
    Published(String),
}

impl Reference {
    pub fn label(&self) -> &str {
        match self {
            Reference::Engine(s) | Reference::Device(s) | Reference::Published(s) => s,
        }
    }
}

/// One case's ratio in a [`Claim::EveryCase`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseFigure {
    pub case: String,
    pub ratio: f64,
}

/// One aim with the run's figures. In the JSON, an object whose `kind`
/// (`figure`, `ratio`, `every_case`, `case_count`, `not_judged`) says
/// which, with the variant's fields beside it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Claim {
    /// One figure of strata's within a bound: `strata's write amplification
    /// before compaction 1.02 (aim ≤ 2.2)`.
    Figure {
        what: String,
        value: f64,
        decimals: usize,
        bound: Bound,
    },
    /// strata's figure as a multiple of a reference's: `4 KiB random writes
    /// at qd1: strata 9000 IOPS = 1.20× io_uring's (aim ≥ 1×)`.
    Ratio {
        what: String,
        /// strata's own figure as shown (`strata 9000 IOPS`).
        strata: String,
        ratio: f64,
        decimals: usize,
        reference: Reference,
        bound: Bound,
    },
    /// One bound on the ratio to a reference in every case, each case's
    /// ratio shown: `DirectRw BufferedWriter ≥ 0.9× the device write line
    /// (8 KiB: 0.95×, …)`. Met when every case is.
    EveryCase {
        what: String,
        bound: Bound,
        reference: Reference,
        cases: Vec<CaseFigure>,
    },
    /// A comparison checked per case, counting the cases where it holds:
    /// `strata ≥ 2× RocksDB on 2 of 3 100 B cases; short on …`. Met when
    /// it fails on none.
    CaseCount {
        /// The comparison, as the prose says it.
        what: String,
        reference: Reference,
        /// `cases`, or a narrower set (`100 B cases`).
        cases_label: String,
        /// Cases where it holds, and cases checked.
        held: usize,
        checked: usize,
        /// Where it fails, each with its figures; `misses_label` says how
        /// (`behind on`, `short on`).
        misses: Vec<String>,
        misses_label: String,
    },
    /// An aim the run refuses to judge: `claim` as the figures would read,
    /// and why they are not like for like (`why`: the share of strata's
    /// gets that no device read served). Neither met nor not met.
    NotJudged { claim: Box<Claim>, why: String },
}

impl Claim {
    /// The verdict, from the figures.
    pub fn verdict(&self) -> Verdict {
        match self {
            Claim::Figure { value, bound, .. } => Verdict::of_met(bound.holds(*value)),
            Claim::Ratio { ratio, bound, .. } => Verdict::of_met(bound.holds(*ratio)),
            Claim::EveryCase { bound, cases, .. } => {
                Verdict::of_met(cases.iter().all(|c| bound.holds(c.ratio)))
            }
            Claim::CaseCount { misses, .. } => Verdict::of_met(misses.is_empty()),
            Claim::NotJudged { .. } => Verdict::NotJudged,
        }
    }

    /// Whether the aim is met, from the figures (an aim not judged is
    /// not).
    pub fn met(&self) -> bool {
        self.verdict() == Verdict::Met
    }

    /// `self`, unless `why` is set: then the aim not judged, for that
    /// reason.
    pub fn judged_unless(self, why: Option<String>) -> Claim {
        match why {
            Some(why) => Claim::NotJudged {
                claim: Box::new(self),
                why,
            },
            None => self,
        }
    }

    /// Whether every figure is finite (JSON has no NaN or infinity).
    pub fn figures_are_finite(&self) -> bool {
        match self {
            Claim::Figure { value, bound, .. } => value.is_finite() && bound.is_finite(),
            Claim::Ratio { ratio, bound, .. } => ratio.is_finite() && bound.is_finite(),
            Claim::EveryCase { bound, cases, .. } => {
                bound.is_finite() && cases.iter().all(|c| c.ratio.is_finite())
            }
            Claim::CaseCount { .. } => true,
            Claim::NotJudged { claim, .. } => claim.figures_are_finite(),
        }
    }

    /// The aim and its figures, without the verdict.
    pub fn text(&self) -> String {
        match self {
            Claim::Figure {
                what,
                value,
                decimals,
                bound,
            } => format!("{what} {} (aim {bound})", bound.show(*value, *decimals)),
            Claim::Ratio {
                what,
                strata,
                ratio,
                decimals,
                reference,
                bound,
            } => format!(
                "{what}: {strata} = {}× {} (aim {bound}×)",
                bound.show(*ratio, *decimals),
                reference.label()
            ),
            Claim::EveryCase {
                what,
                bound,
                reference,
                cases,
            } => {
                let figures: Vec<String> = cases
                    .iter()
                    .map(|c| format!("{}: {}×", c.case, bound.show(c.ratio, 2)))
                    .collect();
                format!(
                    "{what} {bound}× {} ({})",
                    reference.label(),
                    figures.join(", ")
                )
            }
            Claim::CaseCount {
                what,
                cases_label,
                held,
                checked,
                misses,
                misses_label,
                ..
            } => {
                if misses.is_empty() {
                    format!("{what} on all {held} {cases_label}")
                } else {
                    format!(
                        "{what} on {held} of {checked} {cases_label}; {misses_label} {}",
                        misses.join("; ")
                    )
                }
            }
            Claim::NotJudged { claim, why } => format!("{}; {why}", claim.text()),
        }
    }

    /// The note the results keep: the verdict, then the text.
    pub fn note(&self) -> String {
        format!("{} {}", self.verdict().prefix(), self.text())
    }
}

/// The notes of `claims`, in order.
pub fn notes(claims: &[Claim]) -> Vec<String> {
    claims.iter().map(Claim::note).collect()
}

/// An aim as the results keep it (an element of `aims` in the JSON): the
/// verdict and the text the run computed, then the claim they were
/// computed from. `met` and `text` are there for people and scripts
/// reading the JSON; the report shows them as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Aim {
    /// [`Claim::met`] when the run wrote it.
    pub met: bool,
    /// False for an aim the run did not judge ([`Claim::NotJudged`]); true
    /// in results written before aims could be left unjudged.
    #[serde(default = "judged_default")]
    pub judged: bool,
    /// [`Claim::text`] when the run wrote it: the note without its verdict.
    pub text: String,
    pub claim: Claim,
}

impl Aim {
    /// The record of `claim`, its verdict and text computed from it. Its
    /// figures must be finite (a proven invariant: they come from rows'
    /// metrics, which [`crate::results::Row::metric`] keeps finite).
    pub fn new(claim: Claim) -> Aim {
        assert!(
            claim.figures_are_finite(),
            "an aim with a figure that is not finite: {claim:?}"
        );
        Aim {
            met: claim.met(),
            judged: claim.verdict() != Verdict::NotJudged,
            text: claim.text(),
            claim,
        }
    }

    /// The verdict as stored.
    pub fn verdict(&self) -> Verdict {
        if self.judged {
            Verdict::of_met(self.met)
        } else {
            Verdict::NotJudged
        }
    }

    /// Checks the stored verdict against the claim's figures (on reading
    /// results). The text is not checked: its prose may change between
    /// builds, and the report shows it as the run wrote it.
    pub fn check(&self) -> Result<(), String> {
        let stored = self.verdict();
        let figures = self.claim.verdict();
        // `met` is false for an aim not judged: no other pair is valid.
        if stored != figures || (!self.judged && self.met) {
            return Err(format!(
                "aim `{}` is stored as {} but its figures say {}",
                self.text,
                stored.word(),
                figures.word()
            ));
        }
        Ok(())
    }
}

fn judged_default() -> bool {
    true
}

/// The records of `claims`, in order.
pub fn records(claims: &[Claim]) -> Vec<Aim> {
    claims.iter().cloned().map(Aim::new).collect()
}

/// A note written by [`Claim::note`] read back from the results: whether
/// the aim was met, and its text; `None` for any other note. Only for
/// results written before the `aims` array existed (schema 2 files from
/// before it): newer results are read from [`Aim`]s.
pub fn split_note(note: &str) -> Option<(Verdict, &str)> {
    [Verdict::Met, Verdict::NotMet, Verdict::NotJudged]
        .into_iter()
        .find_map(|v| Some((v, note.strip_prefix(v.prefix())?.trim())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_follows_the_bound() {
        let wa = |value| Claim::Figure {
            what: "strata's write amplification before compaction".to_string(),
            value,
            decimals: 2,
            bound: Bound::AtMost(2.2),
        };
        assert!(wa(2.2).met() && !wa(2.21).met());
        assert_eq!(
            wa(1.0).note(),
            "aim met: strata's write amplification before compaction 1.00 (aim ≤ 2.2)"
        );
        assert_eq!(
            wa(3.0).note(),
            "aim not met: strata's write amplification before compaction 3.00 (aim ≤ 2.2)"
        );
    }

    #[test]
    fn a_figure_that_rounds_onto_the_bound_shows_the_decimals_that_tell_it_apart() {
        let at_least = Bound::AtLeast(0.9);
        // Short of the bound: 0.90 would read as met.
        assert_eq!(at_least.show(0.8968, 2), "0.897");
        assert_eq!(at_least.show(0.89999, 2), "0.89999");
        // Clear of the bound, or on it: as asked.
        assert_eq!(at_least.show(0.88, 2), "0.88");
        assert_eq!(at_least.show(0.9, 2), "0.90");
        assert_eq!(at_least.show(0.9049, 2), "0.90");
        // Above an upper bound: 1.10 would read as met.
        let at_most = Bound::AtMost(1.1);
        assert_eq!(at_most.show(1.1012, 2), "1.101");
        assert_eq!(at_most.show(1.0951, 2), "1.10");
        // No end of decimals for a figure a hair past the bound.
        assert_eq!(at_least.show(0.9 - 1e-12, 2), "0.900000");
        let ratio = Claim::Ratio {
            what: "4 KiB random reads at qd16".to_string(),
            strata: "strata 59408 IOPS".to_string(),
            ratio: 0.8968,
            decimals: 2,
            reference: Reference::Engine("io_uring's".to_string()),
            bound: at_least,
        };
        assert_eq!(
            ratio.note(),
            "aim not met: 4 KiB random reads at qd16: strata 59408 IOPS = 0.897× io_uring's (aim ≥ 0.9×)"
        );
    }

    #[test]
    fn every_case_is_met_only_when_each_case_is() {
        let claim = |ratios: &[f64]| Claim::EveryCase {
            what: "DirectRw BufferedWriter".to_string(),
            bound: Bound::AtLeast(0.9),
            reference: Reference::Device("the device write line".to_string()),
            cases: ratios
                .iter()
                .enumerate()
                .map(|(i, r)| CaseFigure {
                    case: format!("c{i}"),
                    ratio: *r,
                })
                .collect(),
        };
        assert!(claim(&[0.9, 1.2]).met());
        assert!(!claim(&[0.95, 0.89]).met());
        assert_eq!(
            claim(&[0.95, 0.5]).text(),
            "DirectRw BufferedWriter ≥ 0.9× the device write line (c0: 0.95×, c1: 0.50×)"
        );
    }

    #[test]
    fn a_note_reads_back_as_its_verdict_and_text() {
        let claim = Claim::Ratio {
            what: "4 KiB random reads at qd16".to_string(),
            strata: "strata 5000 IOPS".to_string(),
            ratio: 0.5,
            decimals: 2,
            reference: Reference::Engine("io_uring's".to_string()),
            bound: Bound::AtLeast(0.8),
        };
        let note = claim.note();
        assert_eq!(
            note,
            "aim not met: 4 KiB random reads at qd16: strata 5000 IOPS = 0.50× io_uring's (aim ≥ 0.8×)"
        );
        assert_eq!(
            split_note(&note),
            Some((Verdict::NotMet, claim.text().as_str()))
        );
        assert_eq!(split_note("a note"), None);
    }

    #[test]
    fn a_case_count_names_its_misses() {
        let claim = |misses: Vec<String>| Claim::CaseCount {
            what: "strata ≥ 2× RocksDB".to_string(),
            reference: Reference::Engine("RocksDB".to_string()),
            cases_label: "100 B cases".to_string(),
            held: 3 - misses.len(),
            checked: 3,
            misses,
            misses_label: "short on".to_string(),
        };
        assert_eq!(
            claim(Vec::new()).note(),
            "aim met: strata ≥ 2× RocksDB on all 3 100 B cases"
        );
        assert_eq!(
            claim(vec!["a: 1.50×".to_string()]).note(),
            "aim not met: strata ≥ 2× RocksDB on 2 of 3 100 B cases; short on a: 1.50×"
        );
    }

    /// One claim of each kind, with the figures of a run.
    fn one_of_each() -> Vec<Claim> {
        vec![
            Claim::Figure {
                what: "strata's write amplification before compaction".to_string(),
                value: 1.02,
                decimals: 2,
                bound: Bound::AtMost(2.2),
            },
            Claim::Ratio {
                what: "4 KiB random writes at qd1".to_string(),
                strata: "strata 30000 IOPS".to_string(),
                ratio: 13.6,
                decimals: 1,
                reference: Reference::Published("the Haura fio engine's".to_string()),
                bound: Bound::AtLeast(10.0),
            },
            Claim::EveryCase {
                what: "DirectRw BufferedWriter".to_string(),
                bound: Bound::AtLeast(0.9),
                reference: Reference::Device("the device write line".to_string()),
                cases: vec![CaseFigure {
                    case: "writes of 1 MiB DirectRw/IoUring".to_string(),
                    ratio: 0.85,
                }],
            },
            Claim::CaseCount {
                what: "strata ≥ 2× RocksDB".to_string(),
                reference: Reference::Engine("RocksDB".to_string()),
                cases_label: "100 B cases".to_string(),
                held: 1,
                checked: 2,
                misses: vec!["100 B Random: 1.50×".to_string()],
                misses_label: "short on".to_string(),
            },
        ]
    }

    #[test]
    fn an_aim_round_trips_through_json_with_its_claim_verdict_and_text() {
        let aims = records(&one_of_each());
        let json = serde_json::to_string(&aims).unwrap();
        let back: Vec<Aim> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, aims);
        for aim in &back {
            assert_eq!(aim.met, aim.claim.met());
            assert_eq!(aim.text, aim.claim.text());
            assert_eq!(aim.check(), Ok(()));
        }
        assert_eq!(
            back.iter().map(|a| a.met).collect::<Vec<_>>(),
            vec![true, true, false, false]
        );
    }

    #[test]
    fn an_aim_in_json_names_its_kind_bound_and_reference() {
        let aim = Aim::new(one_of_each().swap_remove(2));
        assert_eq!(
            serde_json::to_value(&aim).unwrap(),
            serde_json::json!({
                "met": false,
                "judged": true,
                "text": "DirectRw BufferedWriter ≥ 0.9× the device write line (writes of 1 MiB DirectRw/IoUring: 0.85×)",
                "claim": {
                    "kind": "every_case",
                    "what": "DirectRw BufferedWriter",
                    "bound": {"at_least": 0.9},
                    "reference": {"device": "the device write line"},
                    "cases": [{"case": "writes of 1 MiB DirectRw/IoUring", "ratio": 0.85}],
                },
            })
        );
    }

    #[test]
    fn a_stored_verdict_that_contradicts_the_figures_fails_its_check() {
        let mut aim = Aim::new(one_of_each().swap_remove(0));
        assert!(aim.met);
        aim.met = false;
        let err = aim.check().unwrap_err();
        assert!(
            err.contains("stored as not met but its figures say met"),
            "{err}"
        );
    }

    fn cache_hits() -> Claim {
        Claim::Ratio {
            what: "4 KiB random reads at qd1".to_string(),
            strata: "strata 40000 IOPS".to_string(),
            ratio: 2.7,
            decimals: 2,
            reference: Reference::Engine("io_uring's".to_string()),
            bound: Bound::AtLeast(0.9),
        }
        .judged_unless(Some(
            "not judged: 93% of strata's gets read nothing from the device".to_string(),
        ))
    }

    #[test]
    fn an_aim_not_judged_is_neither_met_nor_not_met_whatever_its_figures() {
        let claim = cache_hits();
        assert_eq!(claim.verdict(), Verdict::NotJudged);
        assert!(!claim.met());
        assert_eq!(
            claim.note(),
            "aim not judged: 4 KiB random reads at qd1: strata 40000 IOPS = 2.70× io_uring's (aim ≥ 0.9×); not judged: 93% of strata's gets read nothing from the device"
        );
        assert_eq!(
            split_note(&claim.note()),
            Some((Verdict::NotJudged, claim.text().as_str()))
        );
        let aim = Aim::new(claim.clone());
        assert!(!aim.met && !aim.judged);
        assert_eq!(aim.verdict(), Verdict::NotJudged);
        let back: Aim = serde_json::from_str(&serde_json::to_string(&aim).unwrap()).unwrap();
        assert_eq!(back, aim);
        assert_eq!(back.check(), Ok(()));
        assert_eq!(
            serde_json::to_value(&aim).unwrap()["claim"]["kind"],
            "not_judged"
        );
        // Without a reason the same figures are judged (and met).
        let Claim::NotJudged { claim: inner, .. } = claim else {
            unreachable!()
        };
        assert_eq!(inner.judged_unless(None).verdict(), Verdict::Met);
    }

    #[test]
    fn a_stored_verdict_that_hides_a_refusal_fails_its_check() {
        let mut aim = Aim::new(cache_hits());
        aim.judged = true;
        let err = aim.check().unwrap_err();
        assert!(
            err.contains("stored as not met but its figures say not judged"),
            "{err}"
        );
        aim.met = true;
        assert!(aim.check().is_err());
        // Results written before `judged` existed read as judged.
        let old: Aim = serde_json::from_value(serde_json::json!({
            "met": true,
            "text": "x 1.00 (aim ≤ 2.2)",
            "claim": {"kind": "figure", "what": "x", "value": 1.0, "decimals": 2, "bound": {"at_most": 2.2}},
        }))
        .unwrap();
        assert!(old.judged);
        assert_eq!(old.check(), Ok(()));
    }

    #[test]
    #[should_panic(expected = "not finite")]
    fn an_aim_with_a_figure_that_is_not_finite_is_refused() {
        Aim::new(Claim::Figure {
            what: "x".to_string(),
            value: f64::NAN,
            decimals: 2,
            bound: Bound::AtMost(1.0),
        });
    }
}

//! The aims an experiment holds strata to, as data: what is measured
//! (a figure of strata's, or strata against another engine, the device
//! line or a published figure), the bound it must stay within, and the
//! figures of the run. Each experiment checks its own
//! ([`crate::experiment::Experiment::aims`]); this module owns their prose
//! and the verdict.
//!
//! Invariants: the verdict ([`Claim::met`]) is computed from the figures
//! and the bound, never stored beside them; [`Claim::note`] is the only
//! writer of an aim's note in the results (`aim met: …` / `aim not met:
//! …`) and [`split_note`] its only reader, so the results format (schema
//! 2: aims are notes) has one definition. Pure functions, no I/O.

use std::fmt;

/// How the lab writes an aim's verdict at the start of a note.
pub const AIM_MET_PREFIX: &str = "aim met:";
pub const AIM_NOT_MET_PREFIX: &str = "aim not met:";

/// The bound a figure or ratio must stay within (inclusive).
#[derive(Clone, Copy, Debug, PartialEq)]
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
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::AtLeast(min) => write!(f, "≥ {min}"),
            Bound::AtMost(max) => write!(f, "≤ {max}"),
        }
    }
}

/// What strata's figure is compared with.
#[derive(Clone, Debug, PartialEq)]
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
#[derive(Clone, Debug, PartialEq)]
pub struct CaseFigure {
    pub case: String,
    pub ratio: f64,
}

/// One aim with the run's figures.
#[derive(Clone, Debug, PartialEq)]
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
}

impl Claim {
    /// Whether the aim is met, from the figures.
    pub fn met(&self) -> bool {
        match self {
            Claim::Figure { value, bound, .. } => bound.holds(*value),
            Claim::Ratio { ratio, bound, .. } => bound.holds(*ratio),
            Claim::EveryCase { bound, cases, .. } => cases.iter().all(|c| bound.holds(c.ratio)),
            Claim::CaseCount { misses, .. } => misses.is_empty(),
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
            } => format!("{what} {value:.decimals$} (aim {bound})"),
            Claim::Ratio {
                what,
                strata,
                ratio,
                decimals,
                reference,
                bound,
            } => format!(
                "{what}: {strata} = {ratio:.decimals$}× {} (aim {bound}×)",
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
                    .map(|c| format!("{}: {:.2}×", c.case, c.ratio))
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
        }
    }

    /// The note the results keep: the verdict, then the text.
    pub fn note(&self) -> String {
        let prefix = if self.met() {
            AIM_MET_PREFIX
        } else {
            AIM_NOT_MET_PREFIX
        };
        format!("{prefix} {}", self.text())
    }
}

/// The notes of `claims`, in order.
pub fn notes(claims: &[Claim]) -> Vec<String> {
    claims.iter().map(Claim::note).collect()
}

/// A note written by [`Claim::note`] read back from the results: whether
/// the aim was met, and its text; `None` for any other note.
pub fn split_note(note: &str) -> Option<(bool, &str)> {
    if let Some(text) = note.strip_prefix(AIM_MET_PREFIX) {
        Some((true, text.trim()))
    } else {
        Some((false, note.strip_prefix(AIM_NOT_MET_PREFIX)?.trim()))
    }
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
        assert_eq!(split_note(&note), Some((false, claim.text().as_str())));
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
}

//! Progress of long runs: an indicatif bar when stderr is a terminal, plain
//! lines (at most one per ~10% and per step) otherwise, so CI logs stay
//! readable.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Shortest interval between two plain progress lines of one task.
const PLAIN_LINE_INTERVAL: Duration = Duration::from_secs(5);

pub struct Progress {
    bar: Option<ProgressBar>,
    label: String,
    total: u64,
    done: u64,
    last_line: Instant,
    last_decile: u64,
}

impl Progress {
    /// A task of `total` units (bytes, puts…) named `label`.
    pub fn new(label: &str, total: u64) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total.max(1));
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix:>40} [{bar:30}] {percent:>3}% {elapsed_precise} {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_prefix(label.to_string());
            bar
        });
        if bar.is_none() {
            eprintln!("  {label} ...");
        }
        Progress {
            bar,
            label: label.to_string(),
            total: total.max(1),
            done: 0,
            last_line: Instant::now(),
            last_decile: 0,
        }
    }

    pub fn inc(&mut self, units: u64) {
        self.done += units;
        match &self.bar {
            Some(bar) => bar.inc(units),
            None => {
                let decile = self.done * 10 / self.total;
                if decile > self.last_decile && self.last_line.elapsed() >= PLAIN_LINE_INTERVAL {
                    self.last_decile = decile;
                    self.last_line = Instant::now();
                    eprintln!("  {} {}%", self.label, decile * 10);
                }
            }
        }
    }

    /// Prints a line above the bar (or plainly).
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// Ends the task with a one-line outcome, kept on screen.
    pub fn finish(self, outcome: &str) {
        match self.bar {
            Some(bar) => {
                bar.finish_and_clear();
                eprintln!("  {:<40} {outcome}", self.label);
            }
            None => eprintln!("  {:<40} {outcome}", self.label),
        }
    }
}

/// A heading line for an experiment.
pub fn heading(text: &str) {
    eprintln!("== {text}");
}

//! A one-line progress indicator on stderr, `[3/12] matmul on vulkan:0`, rewritten in place
//! and erased when done. It shows nothing unless it was made for a terminal, so redirected
//! stderr and JSON runs stay clean.

use std::io::Write;

/// ANSI: carriage return, then erase the whole line.
const CLEAR_LINE: &str = "\r\x1b[2K";

#[derive(Debug)]
pub struct Progress {
    enabled: bool,
    total: usize,
    done: usize,
    showing: bool,
}

impl Progress {
    /// A progress line over `total` steps, drawn only when `enabled`.
    pub fn new(total: usize, enabled: bool) -> Progress {
        Progress {
            enabled,
            total,
            done: 0,
            showing: false,
        }
    }

    /// Starts the next step, described by `what`.
    pub fn step(&mut self, what: &str) {
        self.done += 1;
        if !self.enabled {
            return;
        }
        let mut stderr = std::io::stderr().lock();
        // A closed or failing stderr only loses the progress line.
        let _ = write!(stderr, "{CLEAR_LINE}[{}/{}] {what}", self.done, self.total);
        let _ = stderr.flush();
        self.showing = true;
    }

    /// Erases the line, leaving stderr as it was.
    pub fn finish(&mut self) {
        if self.showing {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "{CLEAR_LINE}");
            let _ = stderr.flush();
            self.showing = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

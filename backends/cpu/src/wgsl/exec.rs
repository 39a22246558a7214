//! Runs a [`Program`] one workgroup at a time, all its invocations in lockstep.
//!
//! Each invocation is a lane; every register is a column with one word per lane. Pure
//! instructions compute every lane in a tight loop; memory instructions, checks and writes
//! to per-invocation state touch only the active lanes. Control flow narrows and restores
//! an active mask: an `if` runs each branch for its lanes, a loop runs until no lane is
//! left in it, and `break`, `continue` and `return` park lanes in the enclosing construct's
//! frame until it ends. Barriers need nothing: an instruction finishes on every lane before
//! the next one starts.

use super::host::HostView;
use super::mask::{columns, Active, Mask};
use super::program::{Builtin, Case, HostSpace, Node, Program, Reg};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use xhal_backend::{Error, ErrorKind};

/// Why execution stopped early.
#[derive(Debug)]
pub(crate) enum Stop {
    /// A fault or a timeout, to report.
    Fault(Error),
    /// Another workgroup failed first; its error is the one reported.
    Aborted,
}

impl From<Error> for Stop {
    fn from(error: Error) -> Stop {
        Stop::Fault(error)
    }
}

type Exec<T = ()> = Result<T, Stop>;

/// State every thread of a launch shares: the deadline and the stop flags.
pub(crate) struct Control<'a> {
    pub(crate) deadline: Option<Instant>,
    pub(crate) timeout: Duration,
    /// Set by the first thread that fails, so the others stop.
    pub(crate) abort: AtomicBool,
    /// Whether the backend is shutting down.
    pub(crate) cancelled: &'a (dyn Fn() -> bool + Sync),
}

/// Everything a workgroup reads that is not its own: the launch's memory and sizes.
pub(crate) struct Launch<'a> {
    /// Strict bounds: an out-of-bounds index faults (otherwise it is clamped).
    pub(crate) strict: bool,
    pub(crate) views: Vec<HostView<'a>>,
    pub(crate) immediate: HostView<'a>,
    pub(crate) workgroups: [u32; 3],
    pub(crate) control: &'a Control<'a>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameKind {
    Loop,
    Switch,
    Region,
}

/// Lanes waiting for a construct to end.
#[derive(Debug, Clone, Copy)]
struct Frame {
    kind: FrameKind,
    broke: Mask,
    continued: Mask,
    returned: Mask,
}

impl Frame {
    fn new(kind: FrameKind) -> Frame {
        Frame {
            kind,
            broke: Mask::EMPTY,
            continued: Mask::EMPTY,
            returned: Mask::EMPTY,
        }
    }
}

/// One thread's interpreter: registers and workgroup memory for one workgroup at a time.
pub(crate) struct Machine<'a> {
    pub(super) program: &'a Program,
    pub(super) launch: &'a Launch<'a>,
    pub(super) lanes: usize,
    pub(super) regs: Vec<u32>,
    pub(super) shared: Vec<u32>,
    /// A column for results that only some lanes keep.
    pub(super) scratch: Vec<u32>,
    frames: Vec<Frame>,
    ticks: u32,
    /// Every lane of a workgroup.
    all: Mask,
    /// `local_invocation_id` per lane, computed once.
    local_ids: [Vec<u32>; 3],
    /// Whether the CPU has AVX2 and FMA, for the instruction loops compiled for them.
    #[cfg(target_arch = "x86_64")]
    pub(super) avx2: bool,
    /// The workgroup id whose components the id builtins' registers hold, per component
    /// (nothing writes those registers but `run_workgroup`, so an unchanged component,
    /// like y and z between neighbouring workgroups, needs no rewrite).
    loaded: [Option<u32>; 3],
}

/// Instructions (and loop iterations) between clock reads: a few hundred microseconds of
/// work, so a clock read (tens of nanoseconds) costs nothing measurable, yet a runaway
/// kernel is stopped within a millisecond or so of its deadline.
const WORK_PER_CHECK: u32 = 4096;

impl<'a> Machine<'a> {
    /// A machine with constants and per-lane built-ins in place.
    pub(crate) fn new(program: &'a Program, launch: &'a Launch<'a>) -> Result<Machine<'a>, Error> {
        let lanes = program.lanes;
        let words = program
            .registers
            .checked_mul(lanes)
            .ok_or_else(|| Error::out_of_memory("the kernel's register file does not fit this host"))?;
        let mut regs = Vec::new();
        regs.try_reserve_exact(words)
            .map_err(|error| Error::out_of_memory(format!("the kernel's register file ({words} words): {error}")))?;
        regs.resize(words, 0);
        let mut machine = Machine {
            program,
            launch,
            lanes,
            regs,
            shared: vec![0; program.shared_words],
            scratch: vec![0; lanes],
            frames: Vec::new(),
            ticks: 0,
            all: Mask::full(lanes),
            local_ids: [Vec::new(), Vec::new(), Vec::new()],
            #[cfg(target_arch = "x86_64")]
            avx2: std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"),
            loaded: [None; 3],
        };
        let [sx, sy, _] = program.workgroup_size.map(|size| size as usize);
        for (component, ids) in machine.local_ids.iter_mut().enumerate() {
            *ids = (0..lanes)
                .map(|lane| match component {
                    0 => lane % sx.max(1),
                    1 => (lane / sx.max(1)) % sy.max(1),
                    _ => lane / (sx * sy).max(1),
                } as u32)
                .collect();
        }
        for (reg, value) in &program.constants {
            machine.fill(*reg, *value)?;
        }
        for (builtin, regs) in &program.builtins {
            for (component, reg) in regs.iter().enumerate() {
                match builtin {
                    Builtin::LocalInvocationId => {
                        let ids = machine.local_ids.get(component).cloned().unwrap_or_default();
                        let column = machine.column_mut(*reg)?;
                        for (word, id) in column.iter_mut().zip(ids) {
                            *word = id;
                        }
                    }
                    Builtin::LocalInvocationIndex => {
                        let column = machine.column_mut(*reg)?;
                        for (lane, word) in column.iter_mut().enumerate() {
                            *word = lane as u32;
                        }
                    }
                    Builtin::WorkgroupSize => {
                        let value = program.workgroup_size.get(component).copied().unwrap_or(1);
                        machine.fill(*reg, value)?;
                    }
                    Builtin::NumWorkgroups => {
                        let value = launch.workgroups.get(component).copied().unwrap_or(1);
                        machine.fill(*reg, value)?;
                    }
                    Builtin::GlobalInvocationId | Builtin::WorkgroupId => {}
                }
            }
        }
        Ok(machine)
    }

    /// Runs workgroup `id` to completion.
    pub(crate) fn run_workgroup(&mut self, id: [u32; 3]) -> Result<(), Stop> {
        let program = self.program;
        let fresh = id.map(Some);
        // Unknown until every write below is done (a fault may stop half-way).
        let previous = std::mem::take(&mut self.loaded);
        for (builtin, regs) in &program.builtins {
            for (component, reg) in regs.iter().enumerate() {
                let group = id.get(component).copied().unwrap_or(0);
                if previous.get(component) == fresh.get(component) {
                    continue;
                }
                match builtin {
                    Builtin::WorkgroupId => self.fill(*reg, group)?,
                    Builtin::GlobalInvocationId => {
                        let size = program.workgroup_size.get(component).copied().unwrap_or(1);
                        let base = group.wrapping_mul(size);
                        let start = *reg as usize * self.lanes;
                        let column = self
                            .regs
                            .get_mut(start..start + self.lanes)
                            .ok_or_else(|| internal("a register out of range"))?;
                        let ids = self.local_ids.get(component).map_or(&[][..], Vec::as_slice);
                        for (word, id) in column.iter_mut().zip(ids) {
                            *word = base.wrapping_add(*id);
                        }
                    }
                    _ => {}
                }
            }
        }
        self.loaded = fresh;
        self.shared.fill(0);
        let all = self.all;
        let every = Active {
            mask: &all,
            lanes: self.lanes,
            full: true,
        };
        for instr in &program.prologue {
            self.exec(instr, every)?;
        }
        self.frames.clear();
        let mut active = all;
        self.run(&program.body, &mut active)
    }

    // ---- control flow ------------------------------------------------------------------

    fn run(&mut self, nodes: &[Node], active: &mut Mask) -> Exec {
        for node in nodes {
            if active.is_empty() {
                break;
            }
            match node {
                Node::Code(code) => {
                    let lanes = Active {
                        mask: active,
                        lanes: self.lanes,
                        full: active.same(&self.all),
                    };
                    for instr in code {
                        self.exec(instr, lanes)?;
                    }
                    self.tick(code.len())?;
                }
                Node::If {
                    condition,
                    accept,
                    reject,
                } => {
                    let taken = match self.mask_of(*condition, active)? {
                        // A uniform condition (loop bounds, guards that hold for the whole
                        // workgroup): one branch with the same lanes, nothing to merge.
                        Split::All => {
                            self.run(accept, active)?;
                            continue;
                        }
                        Split::None => {
                            self.run(reject, active)?;
                            continue;
                        }
                        Split::Some(taken) => taken,
                    };
                    let mut yes = taken;
                    let mut no = active.and_not(&taken);
                    if !yes.is_empty() {
                        self.run(accept, &mut yes)?;
                    }
                    if !no.is_empty() {
                        self.run(reject, &mut no)?;
                    }
                    *active = yes.or(&no);
                }
                Node::Loop {
                    body,
                    continuing,
                    break_if,
                } => self.run_loop(body, continuing, *break_if, active)?,
                Node::Switch { selector, cases } => self.run_switch(*selector, cases, active)?,
                Node::Break => {
                    let frame = self.frame(|kind| kind != FrameKind::Region)?;
                    frame.broke = frame.broke.or(active);
                    *active = Mask::EMPTY;
                }
                Node::Continue => {
                    let frame = self.frame(|kind| kind == FrameKind::Loop)?;
                    frame.continued = frame.continued.or(active);
                    *active = Mask::EMPTY;
                }
                Node::Return => {
                    let frame = self.frame(|kind| kind == FrameKind::Region)?;
                    frame.returned = frame.returned.or(active);
                    *active = Mask::EMPTY;
                }
                Node::Region(body) => {
                    self.frames.push(Frame::new(FrameKind::Region));
                    let mut inside = *active;
                    let result = self.run(body, &mut inside);
                    let frame = self.pop()?;
                    result?;
                    *active = inside.or(&frame.returned);
                }
            }
        }
        Ok(())
    }

    fn run_loop(&mut self, body: &[Node], continuing: &[Node], break_if: Option<Reg>, active: &mut Mask) -> Exec {
        self.frames.push(Frame::new(FrameKind::Loop));
        let mut live = *active;
        let result = (|| -> Exec {
            loop {
                self.tick(1)?;
                self.run(body, &mut live)?;
                let frame = self.top()?;
                live = live.or(&frame.continued);
                frame.continued = Mask::EMPTY;
                if live.is_empty() {
                    return Ok(());
                }
                self.run(continuing, &mut live)?;
                if let Some(condition) = break_if {
                    let leaving = self.mask_of(condition, &live)?.within(&live);
                    live = live.and_not(&leaving);
                    let frame = self.top()?;
                    frame.broke = frame.broke.or(&leaving);
                }
                if live.is_empty() {
                    return Ok(());
                }
            }
        })();
        let frame = self.pop()?;
        result?;
        *active = frame.broke;
        Ok(())
    }

    fn run_switch(&mut self, selector: Reg, cases: &[Case], active: &mut Mask) -> Exec {
        let mut matched = Mask::EMPTY;
        for case in cases {
            for value in &case.values {
                matched = matched.or(&self.mask_equal(selector, *value, active)?);
            }
        }
        let default = active.and_not(&matched);
        self.frames.push(Frame::new(FrameKind::Switch));
        let result = (|| -> Exec {
            let mut falling = Mask::EMPTY;
            for case in cases {
                let mut lanes = falling;
                for value in &case.values {
                    lanes = lanes.or(&self.mask_equal(selector, *value, active)?);
                }
                if case.default {
                    lanes = lanes.or(&default);
                }
                if !lanes.is_empty() {
                    self.run(&case.body, &mut lanes)?;
                }
                if case.fall_through {
                    falling = lanes;
                } else {
                    let frame = self.top()?;
                    frame.broke = frame.broke.or(&lanes);
                    falling = Mask::EMPTY;
                }
            }
            Ok(())
        })();
        let frame = self.pop()?;
        result?;
        *active = frame.broke;
        Ok(())
    }

    fn frame(&mut self, matches: impl Fn(FrameKind) -> bool) -> Exec<&mut Frame> {
        self.frames
            .iter_mut()
            .rev()
            .find(|frame| matches(frame.kind))
            .ok_or_else(|| Stop::Fault(internal("a break, continue or return outside its construct")))
    }

    fn top(&mut self) -> Exec<&mut Frame> {
        self.frames
            .last_mut()
            .ok_or_else(|| Stop::Fault(internal("the control-flow stack is empty")))
    }

    fn pop(&mut self) -> Exec<Frame> {
        self.frames
            .pop()
            .ok_or_else(|| Stop::Fault(internal("the control-flow stack is empty")))
    }

    /// Counts work done; now and then checks the clock and the other threads. Loops are
    /// the only way a kernel runs long on few workgroups, and every iteration counts.
    #[inline(always)]
    fn tick(&mut self, work: usize) -> Exec {
        self.ticks = self.ticks.saturating_add(u32::try_from(work).unwrap_or(u32::MAX));
        if self.ticks >= WORK_PER_CHECK {
            self.ticks = 0;
            self.check_time()?;
        }
        Ok(())
    }

    /// Stops when another thread failed or the kernel ran past its time limit.
    fn check_time(&self) -> Exec {
        let control = self.launch.control;
        if control.abort.load(Ordering::Relaxed) {
            return Err(Stop::Aborted);
        }
        if (control.cancelled)() {
            return Err(Stop::Fault(Error::internal(format!(
                "kernel `{}` was stopped: the backend is shutting down",
                self.program.name
            ))));
        }
        if let Some(deadline) = control.deadline {
            if Instant::now() >= deadline {
                return Err(Stop::Fault(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "kernel `{}` ran past {}={}s",
                        self.program.name,
                        crate::config::KERNEL_TIMEOUT_VARIABLE,
                        control.timeout.as_secs_f64()
                    ),
                )));
            }
        }
        Ok(())
    }

    /// The active lanes where boolean register `reg` is true.
    fn mask_of(&self, reg: Reg, within: &Mask) -> Exec<Split> {
        let column = self.column(reg)?;
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: `avx2` is set only where the CPU has AVX2 (see `Machine::new`).
            return Ok(unsafe { true_lanes_avx2(column, within) });
        }
        Ok(lanes_where(column, within, |value| value != 0))
    }

    /// The active lanes where `reg` equals `value`.
    fn mask_equal(&self, reg: Reg, value: u32, within: &Mask) -> Exec<Mask> {
        let column = self.column(reg)?;
        Ok(lanes_where(column, within, |lane_value| lane_value == value).within(within))
    }

    // ---- registers -------------------------------------------------------------------

    #[inline(always)]
    pub(super) fn column(&self, reg: Reg) -> Result<&[u32], Error> {
        let start = reg as usize * self.lanes;
        self.regs
            .get(start..start + self.lanes)
            .ok_or_else(|| internal("a register out of range"))
    }

    #[inline(always)]
    pub(super) fn column_mut(&mut self, reg: Reg) -> Result<&mut [u32], Error> {
        let start = reg as usize * self.lanes;
        self.regs
            .get_mut(start..start + self.lanes)
            .ok_or_else(|| internal("a register out of range"))
    }

    #[inline(always)]
    pub(super) fn fill(&mut self, reg: Reg, value: u32) -> Result<(), Error> {
        self.column_mut(reg)?.fill(value);
        Ok(())
    }

    #[inline(always)]
    pub(super) fn columns<const N: usize>(
        &mut self,
        dst: Reg,
        sources: [Reg; N],
    ) -> Result<(&mut [u32], [&[u32]; N]), Error> {
        columns(&mut self.regs, self.lanes, dst, sources)
    }

    /// Word `lane` of register `reg`.
    #[inline(always)]
    pub(super) fn get(&self, reg: Reg, lane: usize) -> Result<u32, Error> {
        self.regs
            .get(reg as usize * self.lanes + lane)
            .copied()
            .ok_or_else(|| internal("a register out of range"))
    }

    #[inline(always)]
    pub(super) fn set(&mut self, reg: Reg, lane: usize, value: u32) -> Result<(), Error> {
        let slot = self
            .regs
            .get_mut(reg as usize * self.lanes + lane)
            .ok_or_else(|| internal("a register out of range"))?;
        *slot = value;
        Ok(())
    }

    #[inline(always)]
    pub(super) fn offset(&self, offset: Option<Reg>, lane: usize) -> Result<usize, Error> {
        match offset {
            Some(reg) => Ok(self.get(reg, lane)? as usize),
            None => Ok(0),
        }
    }

    #[inline(always)]
    pub(super) fn view(&self, space: HostSpace) -> Result<&HostView<'a>, Error> {
        match space {
            HostSpace::Binding(binding) => self
                .launch
                .views
                .get(binding as usize)
                .ok_or_else(|| internal("a binding without a buffer")),
            HostSpace::Immediate => Ok(&self.launch.immediate),
        }
    }
}

/// Which of some lanes a test selects.
enum Split {
    /// Every one of them.
    All,
    /// None of them.
    None,
    /// These.
    Some(Mask),
}

impl Split {
    /// The selected lanes of `within`, the lanes the split was made from.
    fn within(self, within: &Mask) -> Mask {
        match self {
            Split::All => *within,
            Split::None => Mask::EMPTY,
            Split::Some(mask) => mask,
        }
    }
}

/// [`lanes_where`] the word is not 0, compiled for AVX2 (a branch condition is tested once
/// per branch and loop iteration, over the whole workgroup).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn true_lanes_avx2(column: &[u32], within: &Mask) -> Split {
    lanes_where(column, within, |value| value != 0)
}

/// The lanes of `within` whose word in `column` satisfies `test`, eight lanes at a time.
#[inline(always)]
fn lanes_where(column: &[u32], within: &Mask, test: impl Fn(u32) -> bool) -> Split {
    // Uniform conditions (every lane or none: loop bounds, guards that hold for the whole
    // workgroup) are the common case; a vectorisable count settles them without packing
    // bits. `within` has no lanes beyond the column's.
    let count = column.iter().fold(0u32, |count, value| count + u32::from(test(*value)));
    if count == 0 {
        return Split::None;
    }
    if count as usize == column.len() {
        return Split::All;
    }
    let mut mask = Mask::EMPTY;
    for ((word, chunk), limit) in mask.0.iter_mut().zip(column.chunks(64)).zip(within.0) {
        let mut bits = 0u64;
        let groups = chunk.chunks_exact(8);
        let tail = groups.remainder();
        for (g, group) in groups.enumerate() {
            // One byte (0 or 1) per lane, gathered into the low bits by one multiplication:
            // the tests and the narrowing vectorise, and no per-lane shift is left.
            let mut bytes = [0u8; 8];
            for (byte, value) in bytes.iter_mut().zip(group) {
                *byte = u8::from(test(*value));
            }
            let gathered = u64::from_le_bytes(bytes).wrapping_mul(0x0102_0408_1020_4080) >> 56;
            bits |= gathered << (8 * g);
        }
        let start = chunk.len() - tail.len();
        for (i, value) in tail.iter().enumerate() {
            bits |= u64::from(test(*value)) << (start + i);
        }
        *word = bits & limit;
    }
    Split::Some(mask)
}

pub(super) fn internal(what: &str) -> Error {
    Error::internal(format!("cpu kernel interpreter: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_where_packs_each_lane_into_its_bit() {
        let lanes = 200;
        let column: Vec<u32> = (0..lanes as u32).map(|lane| (lane * 7 + lane / 5) % 3).collect();
        let mut within = Mask::full(lanes);
        within.0[1] &= !0xf0f0;
        let Split::Some(mask) = lanes_where(&column, &within, |value| value == 1) else {
            panic!("a mixed condition");
        };
        let bit = |mask: &Mask, lane: usize| (mask.0[lane / 64] >> (lane % 64)) & 1 == 1;
        for lane in 0..1024 {
            let expected = column.get(lane) == Some(&1) && bit(&within, lane);
            assert_eq!(bit(&mask, lane), expected, "lane {lane}");
        }
        assert!(matches!(lanes_where(&column, &within, |value| value < 3), Split::All));
        assert!(matches!(lanes_where(&column, &within, |value| value > 3), Split::None));
    }
}

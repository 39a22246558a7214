//! Host C's workgroup mode: an entry point written as one function that runs every
//! invocation of a workgroup (see [`Wg`]), and the exported function that runs it.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

use naga::valid::FunctionInfo;
use naga::{AddressSpace, BinaryOperator as Bin, Block, Expression, Handle, Statement, TypeInner};

use super::writer::{ident, Fx, Writer};
use super::{c_symbol, CEntryPoint};
use crate::error::KernelError;
use crate::ir::has_barrier;

type Res<T> = Result<T, KernelError>;

/// The region outside every region: workgroup-level control flow.
pub(super) const CONTROL: usize = usize::MAX;

/// Host C workgroup mode. An entry point with barriers becomes one function that runs every
/// invocation of a workgroup: the statements between barriers (a region) run in a loop over
/// the invocations, and the control flow around barriers, uniform by WGSL's rules, runs once
/// with invocation 0's values. What lives across regions (locals, expression values) is
/// privatised into per-invocation arrays of a frame; the rest stays in C locals of the
/// region's loop, where the C compiler can keep it in registers. The function is written
/// twice: the first pass records where each value is defined and used, the second writes.
pub(super) struct Wg {
    /// Invocations per workgroup.
    pub(super) size: u32,
    /// The workgroup's size in each dimension.
    pub(super) shape: [u32; 3],
    /// What is the same in every invocation: one frame slot, not one per invocation.
    pub(super) uniform: std::rc::Rc<super::uniform::Uniform>,
    /// The region being written, or `CONTROL`.
    pub(super) region: Cell<usize>,
    pub(super) next_region: usize,
    /// Regions that run inside a workgroup-level loop (values there must persist).
    pub(super) loop_regions: BTreeSet<usize>,
    pub(super) loop_depth: usize,
    pub(super) expr_def: RefCell<HashMap<Handle<Expression>, usize>>,
    pub(super) expr_uses: RefCell<HashMap<Handle<Expression>, BTreeSet<usize>>>,
    pub(super) local_uses: RefCell<HashMap<Handle<naga::LocalVariable>, BTreeSet<usize>>>,
    /// Second pass: the expressions whose values are privatised.
    pub(super) private_exprs: HashSet<Handle<Expression>>,
    /// Second pass: by region, the privatised values the same in every invocation that it
    /// computes, kept in a C local declared before the region's loop and stored to the frame
    /// after it.
    pub(super) hoisted: RefCell<HashMap<usize, Vec<HoistedValue>>>,
    /// Frame members (`T name[size];`).
    pub(super) frame: RefCell<Vec<String>>,
    /// Whether the region being written has a `return` (it then needs its end label).
    pub(super) region_returns: Cell<bool>,
    /// Whether any region but the last has a `return`.
    pub(super) any_returns: Cell<bool>,
    /// Whether the region being written is the body's last.
    pub(super) tail_region: Cell<bool>,
    /// Whether invocations can return in a region (they then carry a done flag).
    pub(super) done_flags: bool,
    /// Whether this is the pass that writes (the first only records uses).
    pub(super) writing: bool,
    /// The checked indices the region being written has (see `region.rs`).
    pub(super) region_sites: RefCell<Vec<super::region::Site>>,
    /// Whether the region's second copy, the one without checks, is being written.
    pub(super) second_copy: Cell<bool>,
}

/// A shared value a region keeps in a register.
#[derive(Clone)]
pub(super) struct HoistedValue {
    pub(super) expr: Handle<Expression>,
    pub(super) ty: String,
    pub(super) local: String,
    pub(super) slot: String,
}

impl Wg {
    pub(super) fn record_use(&self, h: Handle<Expression>) {
        let region = self.region.get();
        self.expr_uses.borrow_mut().entry(h).or_default().insert(region);
    }

    /// Notes an index the region being written checks.
    pub(super) fn record_site(&self, site: super::region::Site) {
        if self.region.get() != CONTROL && !self.second_copy.get() {
            self.region_sites.borrow_mut().push(site);
        }
    }

    /// Where an invocation that returns in the region being written goes.
    pub(super) fn end_label(&self) -> String {
        let copy = if self.second_copy.get() { "f" } else { "" };
        format!("xh_r{}{copy}_end", self.region.get())
    }
}

/// Whether every invocation of a workgroup runs a loop (with no barrier in it) the same
/// number of times: its exits (`break_if`, and `break` or `continue` of this loop) are under
/// uniform conditions only, and nothing in it returns. Host C's workgroup mode then runs
/// such a loop once for the workgroup, with its body looped over the invocations (a loop
/// interchange): an inner loop such as a tile's dot product becomes a loop over
/// invocations, which the C compiler vectorises.
pub(super) fn uniform_trip_count(
    uniform: &super::uniform::Uniform,
    body: &Block,
    continuing: &Block,
    break_if: Option<Handle<Expression>>,
) -> bool {
    /// `depth` counts the loops inside the one asked about; `switch` is whether `block` is
    /// in a switch (whose `break` leaves the switch, not the loop) at that depth.
    fn exits_uniformly(
        uniform: &super::uniform::Uniform,
        block: &Block,
        depth: u32,
        switch: bool,
        uniform_control: bool,
    ) -> bool {
        block.iter().all(|s| match s {
            Statement::Return { .. } | Statement::Kill => false,
            Statement::Break => depth > 0 || switch || uniform_control,
            // A `continue` in a switch cannot leave a region (see `wg_needs_control`).
            Statement::Continue => depth > 0 || (!switch && uniform_control),
            Statement::Block(b) => exits_uniformly(uniform, b, depth, switch, uniform_control),
            Statement::If {
                condition,
                accept,
                reject,
            } => {
                let control = uniform_control && uniform.exprs.contains(condition);
                exits_uniformly(uniform, accept, depth, switch, control)
                    && exits_uniformly(uniform, reject, depth, switch, control)
            }
            Statement::Switch { selector, cases } => {
                let control = uniform_control && uniform.exprs.contains(selector);
                cases
                    .iter()
                    .all(|c| exits_uniformly(uniform, &c.body, depth, true, control))
            }
            Statement::Loop { body, continuing, .. } => {
                exits_uniformly(uniform, body, depth + 1, false, uniform_control)
                    && exits_uniformly(uniform, continuing, depth + 1, false, uniform_control)
            }
            _ => true,
        })
    }
    break_if.is_none_or(|b| uniform.exprs.contains(&b))
        && exits_uniformly(uniform, body, 0, false, true)
        && exits_uniformly(uniform, continuing, 0, false, true)
}

/// Whether `block` has a `continue` for a loop around it (not one inside it).
pub(super) fn has_continue(block: &Block) -> bool {
    block.iter().any(|s| match s {
        Statement::Continue => true,
        Statement::Block(b) => has_continue(b),
        Statement::If { accept, reject, .. } => has_continue(accept) || has_continue(reject),
        Statement::Switch { cases, .. } => cases.iter().any(|c| has_continue(&c.body)),
        _ => false,
    })
}

/// What the first workgroup-mode pass decided for the second.
#[derive(Default, Clone)]
struct Decided {
    private_exprs: HashSet<Handle<Expression>>,
    private_locals: HashSet<Handle<naga::LocalVariable>>,
    /// The regions each local is used in (it is a C local of each).
    local_uses: HashMap<Handle<naga::LocalVariable>, BTreeSet<usize>>,
    done_flags: bool,
}

/// The outcome of one workgroup-mode pass.
struct WgPass {
    body: String,
    done_flags: bool,
    expr_def: RefCell<HashMap<Handle<Expression>, usize>>,
    expr_uses: RefCell<HashMap<Handle<Expression>, BTreeSet<usize>>>,
    local_uses: RefCell<HashMap<Handle<naga::LocalVariable>, BTreeSet<usize>>>,
    loop_regions: BTreeSet<usize>,
    private_ctx: bool,
    wg: Option<Wg>,
}

/// A local a region declares.
struct RegionLocal {
    local: Handle<naga::LocalVariable>,
    /// Whether it has one frame slot for the whole workgroup (a uniform local that lives
    /// across regions).
    shared: bool,
    /// Its C type and name.
    ty: String,
    name: String,
    /// What it starts as in each invocation: its frame slot, or its initial value.
    start: String,
}

/// What every region's loop body starts with: the context and built-ins of invocation `li`,
/// and the locals used in that region only.
struct RegionPrologue {
    common: String,
    /// Each region's locals: the local, whether it is one slot for the workgroup (which a
    /// region that does not store to it loads once, before its loop), and its declaration.
    locals: HashMap<usize, Vec<RegionLocal>>,
    /// What each region's loop body ends with: privatised locals stored back.
    writeback: HashMap<usize, Vec<(Handle<naga::LocalVariable>, String)>>,
}

/// What [`Writer::write_host_wrapper`] needs from the shared part of the wrapper.
pub(super) struct HostWrapper<'w> {
    pub(super) index: usize,
    pub(super) inner: &'w str,
    pub(super) params: Vec<String>,
    /// Sets the context's buffers, scalars and lengths from the parameters.
    pub(super) setup: String,
    /// Sets the private globals to their initial values (once per invocation).
    pub(super) private_init: String,
    pub(super) workgroup: &'w [Handle<naga::GlobalVariable>],
    pub(super) buffers: u32,
    pub(super) scalar_block: bool,
    pub(super) uses_len: bool,
}

impl Writer<'_> {
    /// Host C's exported function for an entry point: it runs one whole workgroup.
    ///
    /// ```c
    /// void NAME(buffers..., [scalars], [lengths], const xhal_workgroup* group, void* scratch);
    /// ```
    ///
    /// `scratch` points to `NAME__scratch_bytes` bytes (aligned to 64) that the function owns
    /// for the call: workgroup memory (zeroed here) and, for an entry point with barriers,
    /// the frame of per-invocation values. Without barriers the invocations run one after
    /// another, which is one of the orders WGSL allows; with barriers the entry point was
    /// written in regions (see `Wg`).
    pub(super) fn write_host_wrapper(&self, out: &mut String, w: HostWrapper<'_>) -> Res<CEntryPoint> {
        let m = self.m;
        let ep = &m.entry_points[w.index];
        let wg = ep.workgroup_size;
        let total = wg[0].saturating_mul(wg[1]).saturating_mul(wg[2]);
        let name = &c_symbol(&ep.name);
        let tag = ident(Some(name), "entry");
        let barriers = self.wg_entries.contains(&w.index);
        let mut workgroup_bytes = 0u64;
        let mut scratch_fields = String::new();
        let mut setup = w.setup;
        if !w.workgroup.is_empty() {
            let wt = format!("xh_wgmem_{tag}");
            let mut fields = String::new();
            for &g in w.workgroup {
                let _ = write!(
                    fields,
                    " {} {};",
                    self.type_name(m.global_variables[g].ty)?,
                    self.globals[&g]
                );
                workgroup_bytes += u64::from(self.c_size(m.global_variables[g].ty));
            }
            let _ = writeln!(out, "typedef struct {wt} {{{fields} }} {wt};");
            let _ = write!(scratch_fields, " {wt} wg;");
            for &g in w.workgroup {
                let _ = writeln!(setup, "    c.{0} = &S->wg.{0};", self.globals[&g]);
            }
            setup.push_str("    memset(&S->wg, 0, sizeof S->wg);\n");
        }
        if barriers {
            let _ = write!(scratch_fields, " xh_frame_{tag} frame;");
        }
        if scratch_fields.is_empty() {
            scratch_fields.push_str(" char unused_;");
        }
        let st = format!("xh_scratch_{tag}");
        let _ = writeln!(out, "typedef struct {st} {{{scratch_fields} }} {st};");
        let _ = writeln!(
            out,
            "const uint32_t {name}__workgroup_size[3] = {{{}u, {}u, {}u}};",
            wg[0], wg[1], wg[2]
        );
        let _ = writeln!(out, "const size_t {name}__workgroup_bytes = {workgroup_bytes};");
        let _ = writeln!(out, "const size_t {name}__scratch_bytes = sizeof({st});");
        let mut params = w.params;
        params.push("const xhal_workgroup* group".to_owned());
        params.push("void* scratch".to_owned());
        // The body is static and the exported functions call it, so that a call never
        // binds to a same-named symbol of another library in the process (libc has `step`).
        let body_fn = format!("xh_entry_{tag}");
        let _ = writeln!(out, "static void {body_fn}({}) {{", params.join(", "));
        let _ = writeln!(
            out,
            "    xh_ctx c;\n    XH_UNUSED {st}* S = ({st}*)scratch;\n    memset(&c, 0, sizeof c);\n    c.cancel_ = group->cancel;"
        );
        out.push_str(&setup);
        let _ = writeln!(
            out,
            "    XH_UNUSED xh_u32x3 wid = xh_make_xh_u32x3(group->workgroup_id[0], group->workgroup_id[1], group->workgroup_id[2]);\n    XH_UNUSED xh_u32x3 nwg = xh_make_xh_u32x3(group->num_workgroups[0], group->num_workgroups[1], group->num_workgroups[2]);"
        );
        if barriers {
            out.push_str(&w.private_init);
            if let Some(&bases) = self.fast_entries.get(&w.index) {
                let _ = writeln!(
                    out,
                    "    xh_u64 xh_site[{}] = {{0}};\n    if ({1}_inbounds(&c, wid, nwg, xh_site)) {1}_fast(&S->frame, &c, wid, nwg, xh_site);\n    else {1}(&S->frame, &c, wid, nwg);",
                    bases.max(1),
                    w.inner
                );
            } else {
                let _ = writeln!(out, "    {}(&S->frame, &c, wid, nwg);", w.inner);
            }
            if self.wg_private_ctx.contains(&w.index) {
                let _ = writeln!(
                    out,
                    "    {{ xh_u32 li; for (li = 0; li < {total}u; li++) c.oob_ |= S->frame.c[li].oob_; }}"
                );
            }
            out.push_str("    if (c.oob_) __atomic_store_n(group->out_of_bounds, 1u, __ATOMIC_RELAXED);\n}\n");
        } else {
            let mut call_args = vec!["&c".to_owned()];
            for arg in &ep.function.arguments {
                call_args.push(self.builtin_name(arg, name)?.to_owned());
            }
            let run = |function: &str, fast: bool, prefix: bool| {
                let mut text = "    { XH_UNUSED xh_u32 li, lx, ly, lz;\n".to_owned();
                if prefix {
                    text.push_str("    XH_INVOCATIONS\n    for (li = 0; li < xh_active; li++) {\n");
                } else {
                    text.push_str(&Self::invocation_loop(wg, "    "));
                }
                for line in w.private_init.lines() {
                    let _ = writeln!(text, "    {line}");
                }
                text.push_str(&self.builtins_of_li(wg, "        ", true));
                let fast_args = if fast { ", xh_site, li" } else { "" };
                let _ = writeln!(
                    text,
                    "        {function}({}{fast_args});\n    }} }}",
                    call_args.join(", ")
                );
                text
            };
            if let Some(&bases) = self.fast_entries.get(&w.index) {
                // Every index into a runtime-sized array stays in bounds for this workgroup:
                // the body without the checks runs (the C compiler can vectorise it).
                let _ = writeln!(
                    out,
                    "    xh_u64 xh_site[{}] = {{0}};\n    if ({}_inbounds(&c, wid, nwg, xh_site)) {{",
                    bases.max(1),
                    w.inner
                );
                if self.prefix_entries.contains(&w.index) {
                    // Only the invocations the condition lets through run, without it.
                    let _ = writeln!(
                        out,
                        "    xh_u32 xh_active = {}_active(&c, wid, nwg);\n    if (xh_active <= {total}u) {{",
                        w.inner
                    );
                    out.push_str(&run(&format!("{}_fast", w.inner), true, true));
                    out.push_str("    } else {\n");
                    out.push_str(&run(w.inner, false, false));
                    out.push_str("    }\n");
                } else {
                    out.push_str(&run(&format!("{}_fast", w.inner), true, false));
                }
                out.push_str("    } else {\n");
                out.push_str(&run(w.inner, false, false));
                out.push_str("    }\n");
            } else {
                out.push_str(&run(w.inner, false, false));
            }
            out.push_str("    if (c.oob_) __atomic_store_n(group->out_of_bounds, 1u, __ATOMIC_RELAXED);\n}\n");
        }
        let names: Vec<&str> = params
            .iter()
            .map(|param| param.rsplit(' ').next().unwrap_or_default())
            .collect();
        let _ = writeln!(
            out,
            "void {name}({0});\nvoid {name}({0}) {{\n    {body_fn}({1});\n}}",
            params.join(", "),
            names.join(", ")
        );
        // One signature for every entry point, so that a runner needs no per-kernel glue:
        // `NAME__launch(buffers, scalar bytes, byte lengths, group, scratch)`.
        let mut forwarded = Vec::new();
        let mut unpack = String::new();
        for (k, param) in params.iter().enumerate().take(w.buffers as usize) {
            let ty = param.strip_suffix(&format!(" buffer{k}")).unwrap_or(param);
            forwarded.push(format!("({ty})buffers[{k}]"));
        }
        for param in &params[w.buffers as usize..] {
            if let Some(ty) = param.strip_suffix(" scalars") {
                let _ = writeln!(unpack, "    {ty} s; memcpy(&s, scalars, sizeof s);");
                forwarded.push("s".to_owned());
            } else if let Some(ty) = param.strip_suffix(" lengths") {
                let _ = writeln!(unpack, "    {ty} l; memcpy(l.bytes, lengths, sizeof l.bytes);");
                forwarded.push("l".to_owned());
            }
        }
        forwarded.push("group".to_owned());
        forwarded.push("scratch".to_owned());
        let launch = format!(
            "void {name}__launch(void* const* buffers, const void* scalars, const uint64_t* lengths, const xhal_workgroup* group, void* scratch)"
        );
        let _ = writeln!(
            out,
            "{launch};\n{launch} {{\n    (void)buffers; (void)scalars; (void)lengths;\n{unpack}    {body_fn}({});\n}}",
            forwarded.join(", ")
        );
        Ok(CEntryPoint {
            name: ep.name.clone(),
            symbol: name.clone(),
            buffers: w.buffers,
            scalar_block: w.scalar_block,
            buffer_lengths: w.uses_len,
            workgroup_size: wg,
            workgroup_bytes,
            barriers,
        })
    }

    /// Host C for an entry point with barriers, in workgroup mode (see [`Wg`]): a function
    /// `inner(frame, ctx, wid, nwg)` that runs every invocation of one workgroup, preceded by
    /// the frame's type `xh_frame_NAME`.
    ///
    /// With `sites` (the indices into runtime-sized arrays, all affine in the invocation
    /// index: see `write_bounds_check`) it also writes `inner_fast(..., site)`, the same
    /// function without index checks, and says so.
    pub(super) fn write_workgroup_function(
        &self,
        ep: &naga::EntryPoint,
        fi: &FunctionInfo,
        inner: &str,
        sites: Option<&[super::bounds::IndexSite]>,
    ) -> Res<(String, bool)> {
        let size = ep.workgroup_size.iter().product::<u32>().max(1);
        let uniform = std::rc::Rc::new(super::uniform::analyze(self.m, &ep.function));
        let first = self.workgroup_pass(ep, fi, size, &uniform, None, None)?;
        let mut private_exprs = HashSet::new();
        for (h, uses) in first.expr_uses.borrow().iter() {
            let def = first.expr_def.borrow().get(h).copied().unwrap_or(CONTROL);
            if def == CONTROL || uses.iter().any(|&r| r != def) {
                private_exprs.insert(*h);
            }
        }
        let mut private_locals = HashSet::new();
        for (h, uses) in first.local_uses.borrow().iter() {
            let only = uses.iter().next().copied().unwrap_or(CONTROL);
            if uses.len() > 1 || only == CONTROL || first.loop_regions.contains(&only) {
                private_locals.insert(*h);
            }
        }
        let decided = Decided {
            private_exprs,
            private_locals,
            local_uses: first.local_uses.take(),
            done_flags: first.done_flags,
        };
        let unchecked = match sites {
            Some(sites) => Some(self.workgroup_pass(ep, fi, size, &uniform, Some(decided.clone()), Some(sites))?),
            None => None,
        };
        let second = self.workgroup_pass(ep, fi, size, &uniform, Some(decided), None)?;
        let tag = ident(Some(&c_symbol(&ep.name)), "entry");
        let wg = second.wg.as_ref().expect("workgroup mode");
        let mut frame = String::new();
        if second.private_ctx {
            let _ = write!(frame, " xh_ctx c[{size}];");
        }
        if wg.done_flags {
            let _ = write!(frame, " unsigned char done_[{size}];");
        }
        for member in wg.frame.borrow().iter() {
            let _ = write!(frame, " {member}");
        }
        if frame.is_empty() {
            frame.push_str(" char unused_;");
        }
        // `restrict`: the frame and the context are reached through these pointers alone
        // (buffers and workgroup memory are elsewhere), so the C compiler keeps the
        // context's buffer pointers and scalars in registers across a region's stores
        // instead of reloading them (strict aliasing is off) in every invocation.
        let mut text = format!(
            "typedef struct xh_frame_{tag} {{{frame} }} xh_frame_{tag};\n\
             static void {inner}(xh_frame_{tag}* restrict F, xh_ctx* restrict proto, xh_u32x3 wid, xh_u32x3 nwg) {{\n\
             {}{}}}\n",
            self.pointer_locals("    ", "proto"),
            second.body
        );
        // Both passes made the same decisions, so they lay the frame out alike; were they to
        // differ, the checked body alone runs.
        let fast = unchecked.filter(|fast| {
            fast.wg
                .as_ref()
                .is_some_and(|fast| *fast.frame.borrow() == *wg.frame.borrow())
        });
        if let Some(fast) = &fast {
            let _ = write!(
                text,
                "static void {inner}_fast(xh_frame_{tag}* restrict F, xh_ctx* restrict proto, xh_u32x3 wid, xh_u32x3 nwg, const xh_u64* xh_site) {{\n{}{}}}\n",
                self.pointer_locals("    ", "proto"),
                fast.body
            );
        }
        Ok((text, fast.is_some()))
    }

    /// One pass over an entry point in workgroup mode: the first (`decided` is `None`)
    /// records where values are defined and used, the second writes with its decisions.
    fn workgroup_pass(
        &self,
        ep: &naga::EntryPoint,
        fi: &FunctionInfo,
        size: u32,
        uniform: &std::rc::Rc<super::uniform::Uniform>,
        decided: Option<Decided>,
        sites: Option<&[super::bounds::IndexSite]>,
    ) -> Res<WgPass> {
        let f = &ep.function;
        let writing = decided.is_some();
        let decided = decided.unwrap_or_default();
        let private_ctx = self
            .m
            .global_variables
            .iter()
            .any(|(g, var)| var.space == AddressSpace::Private && !fi[g].is_empty());
        let mut fx = Fx {
            f,
            fi,
            baked: HashMap::new(),
            locals: HashMap::new(),
            args: Vec::new(),
            entry: true,
            indent: 2,
            unchecked: sites.is_some(),
            sites: sites
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(k, &(index, c))| (index, (k, c)))
                .collect(),
            proven: Default::default(),
            calls: Default::default(),
            counted: Default::default(),
            wg: Some(Wg {
                size,
                shape: ep.workgroup_size,
                uniform: std::rc::Rc::clone(uniform),
                region: Cell::new(CONTROL),
                next_region: 0,
                loop_regions: BTreeSet::new(),
                loop_depth: 0,
                expr_def: RefCell::new(HashMap::new()),
                expr_uses: RefCell::new(HashMap::new()),
                local_uses: RefCell::new(HashMap::new()),
                private_exprs: decided.private_exprs,
                hoisted: RefCell::new(HashMap::new()),
                frame: RefCell::new(Vec::new()),
                region_returns: Cell::new(false),
                any_returns: Cell::new(false),
                tail_region: Cell::new(false),
                done_flags: decided.done_flags,
                writing,
                region_sites: RefCell::new(Vec::new()),
                second_copy: Cell::new(false),
            }),
        };
        let ctx = if private_ctx { "&F->c[li]" } else { "proto" };
        let mut prologue = format!("            XH_UNUSED xh_ctx* ctx = {ctx};\n");
        prologue.push_str(&self.builtins_of_li(ep.workgroup_size, "            ", true));
        if sites.is_some() {
            // The unchecked indices are the first invocation's plus a step per invocation.
            prologue.push_str("            XH_UNUSED xh_u32 xh_li = li;\n");
        }
        for (i, arg) in f.arguments.iter().enumerate() {
            let an = format!("a_{}{i}", ident(arg.name.as_deref(), "arg"));
            let t = self.type_name(arg.ty)?;
            let _ = writeln!(
                prologue,
                "            XH_UNUSED {t} {an} = {};",
                self.builtin_name(arg, &ep.name)?
            );
            fx.args.push(an);
        }
        let mut init = String::new();
        if private_ctx {
            init.push_str("        F->c[li] = *proto;\n");
        }
        if decided.done_flags {
            init.push_str("        F->done_[li] = 0;\n");
        }
        // Every local is a C local of each region that uses it, where the C compiler can keep
        // it in a register; one that lives across regions is loaded from the frame at the
        // region's start and stored back at its end.
        let mut region_locals: HashMap<usize, Vec<RegionLocal>> = HashMap::new();
        let mut region_writeback: HashMap<usize, Vec<(Handle<naga::LocalVariable>, String)>> = HashMap::new();
        for (h, local) in f.local_variables.iter() {
            let ln = format!("{}_l{}", ident(local.name.as_deref(), "local"), h.index());
            let t = self.type_name(local.ty)?;
            let value = match local.init {
                Some(e) => self.expr(&fx, e)?,
                None => self.zero_of(local.ty)?,
            };
            let private = decided.private_locals.contains(&h);
            // A vector that each invocation keeps is laid out by component (one array of x's,
            // one of y's, ...), so that the invocations' loop reads and writes each component
            // with a stride of one element: the C compiler then keeps invocations in vector
            // lanes without shuffling (a matrix product's accumulators).
            let components = match self.m.types[local.ty].inner {
                TypeInner::Vector { size: n, scalar } if !uniform.locals.contains(&h) => {
                    Some((n as usize, self.inner_name(&TypeInner::Scalar(scalar))?))
                }
                _ => None,
            };
            const NAMES: [&str; 4] = ["x", "y", "z", "w"];
            // A uniform local needs one slot for the workgroup. `slot` reads the value; `store`
            // writes `{}` to it.
            let (slot, store) = match &components {
                _ if uniform.locals.contains(&h) => (format!("F->{ln}"), format!("F->{ln} = {{}};")),
                Some((n, _)) => {
                    let parts: Vec<String> = (0..*n).map(|k| format!("F->{ln}[{k}][li]")).collect();
                    let sets: Vec<String> = (0..*n)
                        .map(|k| format!("F->{ln}[{k}][li] = xh_v.{};", NAMES[k]))
                        .collect();
                    (
                        format!("xh_make_{t}({})", parts.join(", ")),
                        format!("{{ {t} xh_v = {{}}; {} }}", sets.join(" ")),
                    )
                }
                None => (format!("F->{ln}[li]"), format!("F->{ln}[li] = {{}};")),
            };
            let store_of = |value: &str| store.replacen("{}", value, 1);
            if private {
                let wg = fx.wg.as_ref().expect("workgroup mode");
                match &components {
                    _ if uniform.locals.contains(&h) => wg.frame.borrow_mut().push(format!("{t} {ln};")),
                    Some((n, scalar)) => wg.frame.borrow_mut().push(format!("{scalar} {ln}[{n}][{size}];")),
                    None => wg.frame.borrow_mut().push(format!("{t} {ln}[{size}];")),
                }
                let _ = writeln!(init, "        {}", store_of(&value));
            }
            for &region in decided.local_uses.get(&h).into_iter().flatten() {
                let start = region_locals.entry(region).or_default();
                start.push(RegionLocal {
                    local: h,
                    shared: private && uniform.locals.contains(&h),
                    ty: t.clone(),
                    name: ln.clone(),
                    start: if private { slot.clone() } else { value.clone() },
                });
                if private {
                    region_writeback
                        .entry(region)
                        .or_default()
                        .push((h, format!("    {}", store_of(&ln))));
                }
            }
            fx.locals.insert(h, ln);
        }
        let mut body = format!(
            "    xh_u32 li;\n    XH_UNUSED xh_u32 lx = 0u, ly = 0u, lz = 0u;\n    XH_UNUSED xh_u32 xh_live = {size}u;\n    (void)wid; (void)nwg;\n"
        );
        if !init.is_empty() {
            let _ = write!(body, "    for (li = 0; li < {size}u; li++) {{\n{init}    }}\n");
        }
        let mut text = String::new();
        let prologue = RegionPrologue {
            common: prologue,
            locals: region_locals,
            writeback: region_writeback,
        };
        self.wg_block(&mut fx, &f.body, &mut text, false, &prologue)?;
        body.push_str(&text);
        let wg = fx.wg.take().expect("workgroup mode");
        Ok(WgPass {
            body,
            done_flags: wg.done_flags || wg.any_returns.get(),
            expr_def: RefCell::new(wg.expr_def.take()),
            expr_uses: RefCell::new(wg.expr_uses.take()),
            local_uses: RefCell::new(wg.local_uses.take()),
            loop_regions: wg.loop_regions.clone(),
            private_ctx,
            wg: Some(wg),
        })
    }

    /// Whether statement `s` must run at workgroup level: it holds a barrier, or it leaves
    /// (`break`, `continue`) a loop that does (`in_wg_loop`), or it returns under uniform
    /// control (the whole workgroup then returns at once, and no invocation needs a flag
    /// saying it is done, which would keep the regions after it from vector lanes).
    /// `uniform` is the entry point's uniformity while the control flow around `s` is
    /// uniform, and `None` under a condition that is not.
    fn wg_needs_control(
        &self,
        uniform: Option<&super::uniform::Uniform>,
        s: &Statement,
        span: naga::Span,
        in_wg_loop: bool,
    ) -> Res<bool> {
        Ok(match s {
            Statement::ControlBarrier(_) | Statement::WorkGroupUniformLoad { .. } => true,
            Statement::Block(b) => self.wg_block_needs_control(uniform, b, in_wg_loop)?,
            Statement::If {
                condition,
                accept,
                reject,
            } => {
                let inner = uniform.filter(|u| u.exprs.contains(condition));
                self.wg_block_needs_control(inner, accept, in_wg_loop)?
                    || self.wg_block_needs_control(inner, reject, in_wg_loop)?
            }
            Statement::Switch { cases, .. } => {
                let escapes = cases
                    .iter()
                    .any(|c| has_barrier(&c.body) || (in_wg_loop && has_continue(&c.body)));
                if escapes {
                    return Err(self.unsupported_at("a barrier (or a `continue` past one) inside a switch", span));
                }
                false
            }
            Statement::Loop {
                body,
                continuing,
                break_if,
            } => {
                has_barrier(body)
                    || has_barrier(continuing)
                    || uniform.is_some_and(|u| uniform_trip_count(u, body, continuing, *break_if))
            }
            Statement::Break | Statement::Continue => in_wg_loop,
            Statement::Return { .. } => uniform.is_some(),
            _ => false,
        })
    }

    fn wg_block_needs_control(
        &self,
        uniform: Option<&super::uniform::Uniform>,
        block: &Block,
        in_wg_loop: bool,
    ) -> Res<bool> {
        for (s, span) in block.span_iter() {
            if self.wg_needs_control(uniform, s, *span, in_wg_loop)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// A block at workgroup level: runs of ordinary statements become regions.
    fn wg_block(
        &self,
        fx: &mut Fx,
        block: &Block,
        out: &mut String,
        in_wg_loop: bool,
        prologue: &RegionPrologue,
    ) -> Res<()> {
        let mut pending: Vec<(&Statement, naga::Span)> = Vec::new();
        let body_end = std::ptr::eq(block, &fx.f.body) && matches!(block.last(), Some(Statement::Return { .. }));
        // Control at workgroup level is uniform (WGSL requires it around a barrier).
        let uniform = std::rc::Rc::clone(&fx.wg.as_ref().expect("workgroup mode").uniform);
        for (k, (s, span)) in block.span_iter().enumerate() {
            if body_end && k + 1 == block.len() {
                // The function's closing `return`: every invocation ends here anyway.
                break;
            }
            if self.wg_needs_control(Some(&uniform), s, *span, in_wg_loop)? {
                self.wg_regions(fx, &pending, out, prologue, false)?;
                pending.clear();
                self.wg_statement(fx, s, *span, out, in_wg_loop, prologue)?;
            } else {
                pending.push((s, *span));
            }
        }
        // The body's last region: nothing runs after it, so a `return` in it needs no flag.
        let tail = std::ptr::eq(block, &fx.f.body);
        self.wg_regions(fx, &pending, out, prologue, tail)
    }

    /// A run of ordinary statements: its leading statements that only compute uniform values
    /// (`uniform_only`) become a region of their own, which runs once, and the rest a region
    /// run per invocation. So a costly value the same in every invocation (a function of a
    /// row's sum after a `workgroupUniformLoad`) is computed once rather than once per
    /// invocation; running it earlier than the statements after it is one order WGSL allows.
    fn wg_regions(
        &self,
        fx: &mut Fx,
        statements: &[(&Statement, naga::Span)],
        out: &mut String,
        prologue: &RegionPrologue,
        tail: bool,
    ) -> Res<()> {
        let leading = {
            let wg = fx.wg.as_ref().expect("workgroup mode");
            statements
                .iter()
                .take_while(|(s, _)| Self::uniform_only(fx, wg, s))
                .count()
        };
        let costly = statements[..leading]
            .iter()
            .any(|(s, _)| matches!(s, Statement::Call { .. }));
        if leading == 0 || leading == statements.len() || !costly {
            return self.wg_region(fx, statements, out, prologue, tail);
        }
        self.wg_region(fx, &statements[..leading], out, prologue, false)?;
        self.wg_region(fx, &statements[leading..], out, prologue, tail)
    }

    /// One region: `statements` for every invocation that has not returned.
    fn wg_region(
        &self,
        fx: &mut Fx,
        statements: &[(&Statement, naga::Span)],
        out: &mut String,
        prologue: &RegionPrologue,
        tail: bool,
    ) -> Res<()> {
        if statements.is_empty() {
            return Ok(());
        }
        let (region, done_flags) = {
            let wg = fx.wg.as_mut().expect("workgroup mode");
            let region = wg.next_region;
            wg.next_region += 1;
            wg.region.set(region);
            wg.region_returns.set(false);
            wg.tail_region.set(tail);
            if wg.loop_depth > 0 {
                wg.loop_regions.insert(region);
            }
            (region, wg.done_flags)
        };
        let pad = Self::pad(fx);
        let saved = fx.indent;
        fx.indent += 2;
        fx.wg
            .as_ref()
            .expect("workgroup mode")
            .region_sites
            .borrow_mut()
            .clear();
        let mut inner = String::new();
        for (s, span) in statements {
            self.statement(fx, s, *span, &mut inner)?;
        }
        // Asked while the region is still the one being written, since naming the condition
        // counts as a use of it there.
        let prefix = self.prefix_guard(fx, statements)?;
        let mut stored = HashSet::new();
        for (s, _) in statements {
            super::uniform::stored_locals(fx.f, s, &mut stored);
        }
        let locals = prologue.locals.get(&region).map(Vec::as_slice).unwrap_or_default();
        let wg = fx.wg.as_ref().expect("workgroup mode");
        // A region that only computes uniform values runs once, as invocation 0.
        let once = !wg.region_returns.get() && statements.iter().all(|(s, _)| Self::uniform_only(fx, wg, s));
        let prefix = prefix.filter(|_| !once);
        // The second copy, without the checks its test settles; not for the region of a
        // tree reduction's step, whose loop stops early instead.
        let second = if wg.writing && !once && prefix.is_none() && !fx.unchecked {
            let ready: HashSet<Handle<naga::LocalVariable>> = locals
                .iter()
                .filter(|local| local.shared && !stored.contains(&local.local))
                .map(|local| local.local)
                .collect();
            self.region_second_copy(fx, statements, &ready)?
        } else {
            None
        };
        fx.indent = saved;
        let wg = fx.wg.as_ref().expect("workgroup mode");
        let returns = wg.region_returns.get();
        wg.region.set(CONTROL);
        // A workgroup's value that the region runs per invocation is read once, before the
        // loop: reloaded in the loop, after stores the C compiler cannot tell apart from the
        // frame, it would cost a load per invocation and keep the loop from vectorising. And
        // when the region also stores it, every invocation must start from the value the
        // region started with, not from the previous invocation's result (a `ptr += 64u` or
        // `offset /= 2u` before a barrier would otherwise run once per invocation).
        let per_invocation = |local: &RegionLocal| !local.shared || once;
        let _ = writeln!(out, "{pad}{{ xh_u32 xh_oob = 0u;");
        let hoisted = wg.hoisted.borrow().get(&region).cloned().unwrap_or_default();
        for value in &hoisted {
            let _ = writeln!(out, "{pad}    XH_UNUSED {} {} = {};", value.ty, value.local, value.slot);
        }
        for local in locals.iter().filter(|local| !per_invocation(local)) {
            let (ty, name, start) = (&local.ty, &local.name, &local.start);
            if stored.contains(&local.local) {
                let _ = writeln!(out, "{pad}    XH_UNUSED const {ty} {name}_start = {start};");
            } else {
                let _ = writeln!(out, "{pad}    XH_UNUSED {ty} {name} = {start};");
            }
        }
        // The region's loop over the invocations, around `inner` (`copy` names its labels).
        let region_loop = |out: &mut String, inner: &str, copy: &str| {
            if once {
                let _ = writeln!(out, "{pad}li = 0u; lx = 0u; ly = 0u; lz = 0u; {{");
            } else {
                out.push_str(&Self::invocation_loop(wg.shape, &pad));
            }
            if done_flags && !once {
                let _ = writeln!(out, "{pad}    if (F->done_[li]) continue;");
            }
            for line in prologue.common.lines() {
                let _ = writeln!(out, "{pad}{}", line.trim_start_matches("        "));
            }
            for local in locals {
                let (ty, name, start) = (&local.ty, &local.name, &local.start);
                if per_invocation(local) {
                    let _ = writeln!(out, "{pad}        XH_UNUSED {ty} {name} = {start};");
                } else if stored.contains(&local.local) {
                    let _ = writeln!(out, "{pad}        XH_UNUSED {ty} {name} = {name}_start;");
                }
            }
            out.push_str(inner);
            if returns {
                let _ = writeln!(out, "{pad}    xh_r{region}{copy}_end: ;");
            }
            if let Some(lines) = prologue.writeback.get(&region) {
                // Only what the region may have changed: a store of a value every invocation
                // shares would keep the C compiler from vectorising the loop.
                for (local, line) in lines {
                    if stored.contains(local) {
                        let _ = writeln!(out, "{pad}{line}");
                    }
                }
            }
            if let Some(condition) = &prefix {
                let _ = writeln!(out, "{pad}    if (!({condition})) goto xh_r{region}_past;");
            }
            let _ = writeln!(out, "{pad}}}");
        };
        match &second {
            Some(second) => {
                // The test runs with the first invocation's built-ins, whose values it reads
                // only where they are the same in every invocation.
                let _ = writeln!(out, "{pad}li = 0u; lx = 0u; ly = 0u; lz = 0u; {{ int xh_fast;");
                if !second.lane_sites.is_empty() {
                    let _ = writeln!(out, "{pad}    xh_lin xh_lane_site[{}];", second.lane_sites.len());
                }
                let _ = writeln!(out, "{pad}    {{ int xh_bad = 0;");
                for line in prologue.common.lines() {
                    let _ = writeln!(out, "{pad}{}", line.trim_start_matches("        "));
                }
                let _ = writeln!(out, "{pad}        xh_fast = ({}) && !xh_bad;", second.test);
                for line in &second.lane_sites {
                    let _ = writeln!(out, "{pad}        {line}");
                }
                let _ = writeln!(out, "{pad}    }}");
                let _ = writeln!(out, "{pad}if (xh_fast) {{");
                region_loop(out, &second.body, "f");
                let _ = writeln!(out, "{pad}}} else {{");
                region_loop(out, &inner, "");
                let _ = writeln!(out, "{pad}}} }}");
            }
            None => region_loop(out, &inner, ""),
        }
        if prefix.is_some() {
            let _ = writeln!(out, "{pad}xh_r{region}_past: ;");
        }
        for value in &hoisted {
            let _ = writeln!(out, "{pad}{} = {};", value.slot, value.local);
        }
        let _ = writeln!(out, "{pad}proto->oob_ |= xh_oob; }}");
        if returns && !tail {
            let _ = writeln!(out, "{pad}if (xh_live == 0u) return;");
        }
        Ok(())
    }

    /// For a region that is only `if lane < n { ... }` (after expressions no later region
    /// reads), with `lane` the invocation index and `n` the same in every invocation, the
    /// condition: it holds for a prefix of the invocations, so the loop can stop at the
    /// first one it fails in. A tree reduction's steps then visit the `n` active
    /// invocations instead of the whole workgroup.
    fn prefix_guard(&self, fx: &Fx, statements: &[(&Statement, naga::Span)]) -> Res<Option<String>> {
        let wg = fx.wg.as_ref().expect("workgroup mode");
        let Some(((last, _), before)) = statements.split_last() else {
            return Ok(None);
        };
        let Statement::If { condition, reject, .. } = last else {
            return Ok(None);
        };
        let only_local_values = before.iter().all(|(s, _)| match s {
            Statement::Emit(range) => range.clone().all(|h| !wg.private_exprs.contains(&h)),
            _ => false,
        });
        if !reject.is_empty() || !only_local_values {
            return Ok(None);
        }
        let one_dimensional = wg.shape[1] <= 1 && wg.shape[2] <= 1;
        let rising = |h: Handle<Expression>| match &fx.f.expressions[h] {
            Expression::FunctionArgument(k) => matches!(
                fx.f.arguments[*k as usize].binding,
                Some(naga::Binding::BuiltIn(naga::BuiltIn::LocalInvocationIndex))
            ),
            Expression::AccessIndex { base, index: 0 } if one_dimensional => match fx.f.expressions[*base] {
                Expression::FunctionArgument(k) => matches!(
                    fx.f.arguments[k as usize].binding,
                    Some(naga::Binding::BuiltIn(naga::BuiltIn::LocalInvocationId))
                ),
                _ => false,
            },
            _ => false,
        };
        let shared = |h: &Handle<Expression>| wg.uniform.exprs.contains(h);
        let prefix = match &fx.f.expressions[*condition] {
            Expression::Binary { op, left, right } => match op {
                Bin::Less | Bin::LessEqual => rising(*left) && shared(right),
                Bin::Greater | Bin::GreaterEqual => rising(*right) && shared(left),
                _ => false,
            },
            _ => false,
        };
        if !prefix {
            return Ok(None);
        }
        self.expr(fx, *condition).map(Some)
    }

    /// Whether `s` only computes uniform values (expressions, calls whose result is uniform,
    /// and stores of them to uniform locals), so that running it once serves every invocation.
    /// A call's result is uniform only when the function is pure (`uniform::pure_functions`:
    /// no pointer arguments, no writes, no atomics) and its arguments are uniform, so one call
    /// computes what every invocation's would (the log of a row's sum, say).
    fn uniform_only(fx: &Fx, wg: &Wg, s: &Statement) -> bool {
        match s {
            Statement::Emit(range) => range.clone().all(|h| wg.uniform.exprs.contains(&h)),
            Statement::Call {
                result: Some(result), ..
            } => wg.uniform.exprs.contains(result),
            Statement::Store { pointer, value } => {
                matches!(fx.f.expressions[*pointer], Expression::LocalVariable(l) if wg.uniform.locals.contains(&l))
                    && wg.uniform.exprs.contains(value)
            }
            _ => false,
        }
    }

    /// A statement at workgroup level: control flow runs once, on invocation 0's values
    /// (WGSL requires the control flow around a barrier to be uniform).
    fn wg_statement(
        &self,
        fx: &mut Fx,
        s: &Statement,
        span: naga::Span,
        out: &mut String,
        in_wg_loop: bool,
        prologue: &RegionPrologue,
    ) -> Res<()> {
        let pad = Self::pad(fx);
        match s {
            Statement::ControlBarrier(_) => {
                let _ = writeln!(out, "{pad}/* barrier */");
            }
            Statement::WorkGroupUniformLoad { .. } => {
                self.wg_region(fx, &[(s, span)], out, prologue, false)?;
            }
            Statement::Block(b) => {
                let _ = writeln!(out, "{pad}{{");
                fx.indent += 1;
                self.wg_block(fx, b, out, in_wg_loop, prologue)?;
                fx.indent -= 1;
                let _ = writeln!(out, "{pad}}}");
            }
            Statement::If {
                condition,
                accept,
                reject,
            } => {
                let c = self.expr(fx, *condition)?;
                let _ = writeln!(out, "{pad}li = 0u;\n{pad}if ({c}) {{");
                fx.indent += 1;
                self.wg_block(fx, accept, out, in_wg_loop, prologue)?;
                fx.indent -= 1;
                let _ = writeln!(out, "{pad}}} else {{");
                fx.indent += 1;
                self.wg_block(fx, reject, out, in_wg_loop, prologue)?;
                fx.indent -= 1;
                let _ = writeln!(out, "{pad}}}");
            }
            Statement::Loop {
                body,
                continuing,
                break_if,
            } => {
                let gate = format!("loop_init{}", out.len());
                let _ = writeln!(out, "{pad}{{ xh_bool {gate} = true;");
                let _ = writeln!(out, "{pad}for (;;) {{");
                let _ = writeln!(
                    out,
                    "{pad}    if (__atomic_load_n(proto->cancel_, __ATOMIC_RELAXED)) return;"
                );
                let _ = writeln!(out, "{pad}    if (!{gate}) {{");
                fx.wg.as_mut().expect("workgroup mode").loop_depth += 1;
                fx.indent += 2;
                self.wg_block(fx, continuing, out, true, prologue)?;
                if let Some(b) = break_if {
                    let c = self.expr(fx, *b)?;
                    let _ = writeln!(out, "{}li = 0u;\n{}if ({c}) {{ break; }}", Self::pad(fx), Self::pad(fx));
                }
                fx.indent -= 2;
                let _ = writeln!(out, "{pad}    }}");
                let _ = writeln!(out, "{pad}    {gate} = false;");
                fx.indent += 1;
                self.wg_block(fx, body, out, true, prologue)?;
                fx.indent -= 1;
                fx.wg.as_mut().expect("workgroup mode").loop_depth -= 1;
                let _ = writeln!(out, "{pad}}} }}");
            }
            Statement::Break => {
                let _ = writeln!(out, "{pad}break;");
            }
            Statement::Continue => {
                let _ = writeln!(out, "{pad}continue;");
            }
            // Under uniform control: every invocation still running returns here.
            Statement::Return { value: None } => {
                let _ = writeln!(out, "{pad}return;");
            }
            _ => return Err(self.unsupported_at("this statement around a barrier", span)),
        }
        Ok(())
    }

    /// Declarations of `lid`, `gid` and `lidx` for invocation `li` of a workgroup whose
    /// `wid` and `nwg` are in scope.
    pub(super) fn builtins_of_li(&self, wg: [u32; 3], pad: &str, nested: bool) -> String {
        let xy = wg[0].wrapping_mul(wg[1]);
        if wg[1] <= 1 && wg[2] <= 1 {
            return format!(
                "{pad}XH_UNUSED xh_u32x3 lid = xh_make_xh_u32x3(li, 0u, 0u);\n\
                 {pad}XH_UNUSED xh_u32x3 gid = xh_make_xh_u32x3(wid.x * {x}u + li, wid.y, wid.z);\n\
                 {pad}XH_UNUSED xh_u32 lidx = li;\n",
                x = wg[0].max(1)
            );
        }
        let lid = if nested {
            "lx, ly, lz".to_owned()
        } else {
            format!(
                "li % {x}u, (li / {x}u) % {y}u, li / {xy}u",
                x = wg[0].max(1),
                y = wg[1].max(1),
                xy = xy.max(1)
            )
        };
        format!(
            "{pad}XH_UNUSED xh_u32x3 lid = xh_make_xh_u32x3({lid});\n\
             {pad}XH_UNUSED xh_u32x3 gid = xh_make_xh_u32x3(wid.x * {x}u + lid.x, wid.y * {y}u + lid.y, wid.z * {z}u + lid.z);\n\
             {pad}XH_UNUSED xh_u32 lidx = li;\n",
            x = wg[0].max(1),
            y = wg[1].max(1),
            z = wg[2],
        )
    }

    /// The head of a loop over every invocation of a workgroup (its body then closes it with
    /// one `}`), which sets `li` and, for a workgroup of more than one dimension, `lx`, `ly`
    /// and `lz` (declared by the caller). The innermost loop runs along x, so that an
    /// access like `tile[ly * 16u + lx]` is contiguous, and it carries `XH_INVOCATIONS`: the
    /// invocations between two barriers are unordered in WGSL, so the C compiler may
    /// vectorise across them without proving them independent.
    fn invocation_loop(wg: [u32; 3], pad: &str) -> String {
        let (x, y, z) = (wg[0].max(1), wg[1].max(1), wg[2].max(1));
        if y == 1 && z == 1 {
            return format!("{pad}XH_INVOCATIONS\n{pad}for (li = 0; li < {x}u; li++) {{\n");
        }
        format!(
            "{pad}for (lz = 0; lz < {z}u; lz++) for (ly = 0; ly < {y}u; ly++)\n\
             {pad}XH_INVOCATIONS\n\
             {pad}for (lx = 0; lx < {x}u; lx++) {{\n\
             {pad}    li = (lz * {y}u + ly) * {x}u + lx;\n"
        )
    }
}

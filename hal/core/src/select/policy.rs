//! Choosing a device: the [`Policy`] that orders candidates, the [`Selector`] that judges
//! them against a device selector and requirements, and the [`Explanation`] of its choice.

use super::grammar::{DeviceSelector, Match};
use super::ENV_VAR;
use crate::backend::{DeviceInfo, DeviceType, Features, KernelFormat};
use crate::error::{Error, ErrorKind, Result};
use std::ffi::OsString;
use std::fmt;

/// How to order the devices that pass the selector and the requirements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Policy {
    /// Discrete GPU, then integrated GPU, accelerator, other, CPU. The default: the fastest
    /// device is usually the one with its own memory.
    #[default]
    PreferDiscreteGpu,
    /// CPU first, then the same order as [`Policy::PreferDiscreteGpu`]: for debugging, and for
    /// work too small to pay for a transfer.
    PreferCpu,
    /// Only devices the device selector matches, strictly in the order of its terms and then
    /// in discovery order; device types play no part. Choosing fails without a device selector.
    Explicit,
}

impl Policy {
    /// The policy's name in explanations: `prefer-discrete-gpu`, `prefer-cpu`, `explicit`.
    pub fn name(self) -> &'static str {
        match self {
            Policy::PreferDiscreteGpu => "prefer-discrete-gpu",
            Policy::PreferCpu => "prefer-cpu",
            Policy::Explicit => "explicit",
        }
    }

    /// Position of a device type in this policy's order, 0 first.
    fn type_rank(self, device_type: DeviceType) -> usize {
        let gpu_first = match device_type {
            DeviceType::DiscreteGpu => 0,
            DeviceType::IntegratedGpu => 1,
            DeviceType::Accelerator => 2,
            DeviceType::Other => 3,
            DeviceType::Cpu => 4,
        };
        match self {
            Policy::PreferDiscreteGpu => gpu_first,
            Policy::PreferCpu if device_type == DeviceType::Cpu => 0,
            Policy::PreferCpu => gpu_first + 1,
            Policy::Explicit => 0,
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One device that could be chosen, as discovery found it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// The backend's name.
    pub backend: &'a str,
    /// The device's index within its backend.
    pub index: u32,
    /// What the backend reports about the device.
    pub info: &'a DeviceInfo,
}

impl Candidate<'_> {
    /// `vulkan:0 (llvmpipe)`, or `vulkan:0` for a device without a name.
    fn label(&self) -> String {
        if self.info.name.is_empty() {
            format!("{}:{}", self.backend, self.index)
        } else {
            format!("{}:{} ({})", self.backend, self.index, self.info.name)
        }
    }

    /// `cpu:0 (xhal CPU reference device 0, cpu)`: the label with the device type, for the
    /// list of what is present.
    fn described(&self) -> String {
        if self.info.name.is_empty() {
            format!("{}:{} ({})", self.backend, self.index, self.info.device_type)
        } else {
            format!(
                "{}:{} ({}, {})",
                self.backend, self.index, self.info.name, self.info.device_type
            )
        }
    }
}

/// The judgement on one candidate.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Verdict {
    /// The device: `vulkan:0 (llvmpipe)`.
    pub device: String,
    /// True when the device may be chosen.
    pub accepted: bool,
    /// Place among the accepted devices, 1 for the best; `None` when rejected.
    pub rank: Option<usize>,
    /// Why, in words: "matches term 2 \`vulkan:*\`; discrete GPU", "excluded by \`!cpu\`",
    /// "lacks feature f64", "has 1.0 GiB, needs 2.0 GiB"...
    pub reason: String,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rank {
            Some(rank) if self.accepted => write!(f, "#{rank} {}: {}", self.device, self.reason),
            _ => write!(f, "-- {}: rejected: {}", self.device, self.reason),
        }
    }
}

/// Every candidate judged and the accepted ones ordered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranking {
    /// Indices into the candidates of the accepted devices, best first.
    pub accepted: Vec<usize>,
    /// One verdict per candidate, in the candidates' order.
    pub verdicts: Vec<Verdict>,
}

/// Why a device was chosen, and what became of every other candidate.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Explanation {
    /// One line, e.g. "chose cpu:0 (xhal CPU reference device 0): first match of term 1 \`cpu\`
    /// in XHAL_DEVICE=cpu", where `XHAL_DEVICE` is the selector's
    /// [origin](DeviceSelector::origin).
    pub summary: String,
    /// One verdict per candidate, in the candidates' order.
    pub verdicts: Vec<Verdict>,
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.summary)?;
        for verdict in &self.verdicts {
            write!(f, "\n  {verdict}")?;
        }
        Ok(())
    }
}

/// The chosen device and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// Index into the candidates.
    pub index: usize,
    /// Why this one.
    pub explanation: Explanation,
}

/// Chooses a device: an optional [`DeviceSelector`] (usually `XHAL_DEVICE`), a [`Policy`] and
/// requirements. Devices failing the selector or a requirement are rejected; the rest are
/// ordered by the first positive term that matches them, then by the policy's type order,
/// then in discovery order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    pub(super) policy: Policy,
    devices: Option<DeviceSelector>,
    pub(super) features: Features,
    min_memory: u64,
    pub(super) kernel_formats: Vec<KernelFormat>,
}

/// Why a candidate was rejected, as far as the error message of [`Selector::choose`] cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rejection {
    Excluded,
    NotNamed,
    NoSelector,
    Requirements,
}

/// The internal judgement on one candidate, from which verdicts and messages are written.
struct Judgement {
    /// The positive term that matched, if any.
    term: Option<usize>,
    rejection: Option<Rejection>,
    reason: String,
}

impl Selector {
    /// Policy [`Policy::PreferDiscreteGpu`], no requirements, no device selector.
    pub fn new() -> Selector {
        Selector::default()
    }

    /// [`Selector::new`] with the device selector of `XHAL_DEVICE` when it is set to something
    /// other than whitespace; a value that does not parse, or is not UTF-8, is an error of kind
    /// [`ErrorKind::Selection`].
    pub fn from_env() -> Result<Selector> {
        Selector::from_env_value(std::env::var_os(ENV_VAR))
    }

    /// The body of [`Selector::from_env`], apart so that tests need not change the process's
    /// environment, which other threads may be reading.
    pub(super) fn from_env_value(value: Option<OsString>) -> Result<Selector> {
        let Some(value) = value else {
            return Ok(Selector::new());
        };
        let Some(text) = value.to_str() else {
            return Err(Error::new(
                ErrorKind::Selection,
                format!("{ENV_VAR} is not valid UTF-8: {value:?}"),
            ));
        };
        // Whitespace only is taken as unset, like empty: `XHAL_DEVICE= ` is not a request.
        if text.trim().is_empty() {
            return Ok(Selector::new());
        }
        tracing::debug!("{ENV_VAR}={text}");
        Selector::parse(text)
    }

    /// [`Selector::new`] with the device selector parsed from `text`, which came from
    /// `XHAL_DEVICE` as far as messages tell.
    pub fn parse(text: &str) -> Result<Selector> {
        Selector::parse_from(text, ENV_VAR)
    }

    /// [`Selector::new`] with the device selector parsed from `text`, which came from `origin`
    /// (see [`DeviceSelector::parse_from`]).
    pub fn parse_from(text: &str, origin: &str) -> Result<Selector> {
        Ok(Selector::new().with_devices(DeviceSelector::parse_from(text, origin)?))
    }

    /// Uses `devices` as the device selector, replacing any other.
    pub fn with_devices(mut self, devices: DeviceSelector) -> Selector {
        self.devices = Some(devices);
        self
    }

    /// Orders devices by `policy`.
    pub fn policy(mut self, policy: Policy) -> Selector {
        self.policy = policy;
        self
    }

    /// Rejects devices lacking any of `features`; calls add up.
    pub fn require_features(mut self, features: Features) -> Selector {
        self.features = self.features | features;
        self
    }

    /// Rejects devices with less than `bytes` of memory in all (`DeviceInfo::total_memory`; free
    /// memory changes from moment to moment, so it would make the choice unrepeatable). A later
    /// call replaces an earlier one.
    pub fn min_memory(mut self, bytes: u64) -> Selector {
        self.min_memory = bytes;
        self
    }

    /// Adds `format` to the kernel formats the application can provide; a device must accept at
    /// least one of them.
    pub fn require_kernel_format(mut self, format: KernelFormat) -> Selector {
        if !self.kernel_formats.contains(&format) {
            self.kernel_formats.push(format);
        }
        self
    }

    /// The device selector, if one was given.
    pub fn device_selector(&self) -> Option<&DeviceSelector> {
        self.devices.as_ref()
    }

    /// Judges every candidate and orders the accepted ones, best first.
    pub fn rank(&self, candidates: &[Candidate<'_>]) -> Ranking {
        let judgements: Vec<Judgement> = candidates.iter().map(|c| self.judge(c)).collect();
        self.ranking(candidates, &judgements)
    }

    /// The best candidate, with an explanation; when none is accepted, an error of kind
    /// [`ErrorKind::Selection`] that lists what is present and why each device was rejected.
    pub fn choose(&self, candidates: &[Candidate<'_>]) -> Result<Choice> {
        let judgements: Vec<Judgement> = candidates.iter().map(|c| self.judge(c)).collect();
        let ranking = self.ranking(candidates, &judgements);
        let best = ranking.accepted.first().copied();
        let Some((index, candidate)) = best.and_then(|i| Some((i, candidates.get(i)?))) else {
            return Err(Error::new(
                ErrorKind::Selection,
                self.nothing_accepted(candidates, &judgements),
            ));
        };
        let term = judgements.get(index).and_then(|j| j.term);
        let summary = self.summary(candidates, &judgements, &ranking, candidate, term);
        tracing::debug!("{summary}");
        Ok(Choice {
            index,
            explanation: Explanation {
                summary,
                verdicts: ranking.verdicts,
            },
        })
    }

    fn judge(&self, candidate: &Candidate<'_>) -> Judgement {
        let info = candidate.info;
        let rejected = |rejection, reason: String| Judgement {
            term: None,
            rejection: Some(rejection),
            reason,
        };
        let outcome = self.devices.as_ref().map(|devices| {
            (
                devices,
                devices.evaluate(candidate.backend, candidate.index, info.device_type),
            )
        });
        let term = match outcome {
            Some((devices, Match::Excluded(position))) => {
                return rejected(Rejection::Excluded, format!("excluded by `{}`", devices.term(position)));
            }
            Some((devices, Match::NotNamed)) => {
                return rejected(
                    Rejection::NotNamed,
                    format!("not named by {}={devices}", devices.origin),
                );
            }
            Some((_, Match::Term(position))) => Some(position),
            Some((_, Match::Allowed)) => None,
            None if self.policy == Policy::Explicit => {
                return rejected(
                    Rejection::NoSelector,
                    "policy explicit needs a device selector, and there is none".to_string(),
                );
            }
            None => None,
        };

        let mut failures = Vec::new();
        if !info.features.contains(self.features) {
            let missing = Features(self.features.0 & !info.features.0);
            let noun = if missing.0.count_ones() == 1 {
                "feature"
            } else {
                "features"
            };
            failures.push(format!("lacks {noun} {}", feature_list(missing)));
        }
        if info.total_memory < self.min_memory {
            let (has, needs) = (format_bytes(info.total_memory), format_bytes(self.min_memory));
            // Rounding can make two different sizes print alike; then only bytes tell them apart.
            if has == needs {
                failures.push(format!(
                    "has {} bytes, needs {} bytes",
                    info.total_memory, self.min_memory
                ));
            } else {
                failures.push(format!("has {has}, needs {needs}"));
            }
        }
        if !self.kernel_formats.is_empty()
            && !self
                .kernel_formats
                .iter()
                .any(|format| info.kernel_formats.contains(format))
        {
            let accepts = if info.kernel_formats.is_empty() {
                "none".to_string()
            } else {
                format_list(&info.kernel_formats)
            };
            failures.push(format!(
                "accepts none of the kernel formats {} (it accepts {accepts})",
                format_list(&self.kernel_formats)
            ));
        }
        if !failures.is_empty() {
            return rejected(Rejection::Requirements, failures.join("; "));
        }

        let kind = type_description(info.device_type);
        let reason = match (term, &self.devices) {
            (Some(position), Some(devices)) => {
                format!("matches term {} `{}`; {kind}", position + 1, devices.term(position))
            }
            _ => kind.to_string(),
        };
        Judgement {
            term,
            rejection: None,
            reason,
        }
    }

    fn ranking(&self, candidates: &[Candidate<'_>], judgements: &[Judgement]) -> Ranking {
        let mut accepted: Vec<usize> = judgements
            .iter()
            .enumerate()
            .filter(|(_, judgement)| judgement.rejection.is_none())
            .map(|(index, _)| index)
            .collect();
        // The sort is stable and the index is part of the key anyway: discovery order breaks ties.
        accepted.sort_by_key(|&index| {
            let term = judgements.get(index).and_then(|j| j.term).unwrap_or(0);
            let kind = candidates
                .get(index)
                .map_or(0, |c| self.policy.type_rank(c.info.device_type));
            (term, kind, index)
        });
        let verdicts = candidates
            .iter()
            .zip(judgements)
            .enumerate()
            .map(|(index, (candidate, judgement))| Verdict {
                device: candidate.label(),
                accepted: judgement.rejection.is_none(),
                rank: accepted.iter().position(|&a| a == index).map(|p| p + 1),
                reason: judgement.reason.clone(),
            })
            .collect();
        Ranking { accepted, verdicts }
    }

    fn summary(
        &self,
        candidates: &[Candidate<'_>],
        judgements: &[Judgement],
        ranking: &Ranking,
        chosen: &Candidate<'_>,
        term: Option<usize>,
    ) -> String {
        let label = chosen.label();
        // `XHAL_DEVICE=cuda,cpu`, or `SELECTOR=cuda,cpu` for a selector from elsewhere.
        let selector = self
            .devices
            .as_ref()
            .map(|devices| format!("{}={devices}", devices.origin))
            .unwrap_or_default();
        if let (Some(position), Some(devices)) = (term, &self.devices) {
            let mut summary = format!(
                "chose {label}: first match of term {} `{}` in {selector}",
                position + 1,
                devices.term(position)
            );
            let rivals = ranking
                .accepted
                .iter()
                .filter(|&&i| judgements.get(i).and_then(|j| j.term) == Some(position))
                .count();
            if rivals > 1 {
                summary.push_str(&match self.policy {
                    Policy::Explicit => {
                        format!("; {rivals} devices match it, taken in discovery order")
                    }
                    policy => format!(
                        "; {rivals} devices match it, ordered by policy {policy}, \
                         then discovery order"
                    ),
                });
            }
            return summary;
        }
        if self.policy == Policy::Explicit {
            return format!(
                "chose {label}: first device in discovery order that {selector} \
                 allows (policy explicit)"
            );
        }
        let mut notes = vec![chosen.info.device_type.name().to_string()];
        let (wanted, is_wanted): (&str, fn(DeviceType) -> bool) = match self.policy {
            Policy::PreferCpu => ("CPU", |t| t == DeviceType::Cpu),
            _ => ("GPU", DeviceType::is_gpu),
        };
        if !is_wanted(chosen.info.device_type) {
            let present = candidates.iter().any(|c| is_wanted(c.info.device_type));
            notes.push(if present {
                format!("no {wanted} accepted")
            } else {
                format!("no {wanted} present")
            });
        }
        if self.devices.is_some() {
            notes.push(selector);
        }
        format!("chose {label}: best by policy {} ({})", self.policy, notes.join("; "))
    }

    fn nothing_accepted(&self, candidates: &[Candidate<'_>], judgements: &[Judgement]) -> String {
        let failed_requirements = judgements.iter().any(|j| j.rejection == Some(Rejection::Requirements));
        let mut message = match &self.devices {
            None if self.policy == Policy::Explicit => {
                "policy explicit needs a device selector (set XHAL_DEVICE or call \
                 Selector::with_devices)"
                    .to_string()
            }
            Some(devices) if failed_requirements => format!(
                "of the devices {} \"{devices}\" matches, none meets the requirements ({})",
                devices.origin,
                self.requirements()
            ),
            Some(devices) => format!("{} \"{devices}\" matches no device", devices.origin),
            None if failed_requirements => {
                format!("no device meets the requirements ({})", self.requirements())
            }
            None => "no device is present".to_string(),
        };

        let present: Vec<String> = candidates
            .iter()
            .zip(judgements)
            .map(|(candidate, judgement)| match judgement.rejection {
                // "Not named" repeats the head of the message; the others add to it.
                Some(Rejection::Excluded | Rejection::Requirements) => {
                    format!("{} [{}]", candidate.described(), judgement.reason)
                }
                _ => candidate.described(),
            })
            .collect();
        if present.is_empty() {
            if self.devices.is_some() || self.policy == Policy::Explicit || failed_requirements {
                message.push_str("; present: none");
            }
        } else {
            message.push_str("; present: ");
            message.push_str(&present.join(", "));
        }

        let mut backends: Vec<&str> = Vec::new();
        for candidate in candidates {
            if !backends.contains(&candidate.backend) {
                backends.push(candidate.backend);
            }
        }
        let absent: Vec<String> = self
            .devices
            .as_ref()
            .map(DeviceSelector::named_backends)
            .unwrap_or_default()
            .into_iter()
            .filter(|name| !backends.contains(&name.as_str()))
            .collect();
        if !absent.is_empty() {
            let quoted: Vec<String> = absent.iter().map(|name| format!("\"{name}\"")).collect();
            let verb = if absent.len() == 1 { "backend" } else { "backends" };
            let is = if absent.len() == 1 { "is" } else { "are" };
            let others = if backends.is_empty() {
                "no backend reported a device".to_string()
            } else {
                format!("backends present: {}", backends.join(", "))
            };
            message.push_str(&format!("; {verb} {} {is} not present ({others})", quoted.join(", ")));
        }
        message
    }

    /// The requirements in words, for the error when no device meets them.
    pub(super) fn requirements(&self) -> String {
        let mut parts = Vec::new();
        if self.features.0 != 0 {
            parts.push(format!("features {}", feature_list(self.features)));
        }
        if self.min_memory > 0 {
            parts.push(format!("at least {} of memory", format_bytes(self.min_memory)));
        }
        if !self.kernel_formats.is_empty() {
            parts.push(format!("a kernel format of {}", format_list(&self.kernel_formats)));
        }
        parts.join("; ")
    }
}

/// `discrete GPU`, `CPU`...: a device type in the words of a reason.
fn type_description(device_type: DeviceType) -> &'static str {
    match device_type {
        DeviceType::Cpu => "CPU",
        DeviceType::IntegratedGpu => "integrated GPU",
        DeviceType::DiscreteGpu => "discrete GPU",
        DeviceType::Accelerator => "accelerator",
        DeviceType::Other => "other device",
    }
}

/// Feature names, with bits this host has no name for written in hex.
fn feature_list(features: Features) -> String {
    let mut names: Vec<String> = features.names().into_iter().map(String::from).collect();
    let known = Features::ALL.iter().fold(0, |bits, (feature, _)| bits | feature.0);
    let unknown = features.0 & !known;
    if unknown != 0 {
        names.push(format!("{unknown:#x}"));
    }
    names.join(", ")
}

fn format_list(formats: &[KernelFormat]) -> String {
    formats
        .iter()
        .map(|format| format.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `2.0 GiB`, `512.0 MiB`, `100 bytes`.
pub(super) fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if bytes >= size {
            return format!("{:.1} {unit}", bytes as f64 / size as f64);
        }
    }
    format!("{bytes} bytes")
}

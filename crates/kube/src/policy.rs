//! Holding a request to its namespace's policy: tenants cannot take the disk.
//!
//! A weight or memory priority outside the policy's range is clamped into it; limits looser than the
//! QoS default's (a knob raised, dropped, or with a larger burst; a larger `iops-size`) are put back
//! to the default's where the policy forbids raising them. Each change is a [`Finding`] naming the
//! value, where it came from (the annotation) and the rule. Invalid values never get this far: they
//! were left out when the annotations were read, so the default took their place.

use ioshare_core::limit::{Knob, KnobLimit};
use ioshare_core::Limits;

use crate::config::Policy;
use crate::finding::{Finding, Reason};
use crate::settings::{Request, Sourced};

/// Clamps `request` into `policy`; `baseline` is the QoS default's limits, `whom` names the cgroup
/// (`pod`, `container db`) and `namespace` the namespace in findings.
pub fn apply(policy: &Policy, request: &mut Request, baseline: &Limits, whom: &str, namespace: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    let rule = |what: &str| format!("policy '{}' (namespace {namespace}) {what}", policy.name);
    if let Some(w) = &mut request.weight {
        let (lo, hi) = policy.weight;
        if let Some(clamped) = clamp(w, lo, hi) {
            let msg = format!(
                "{}: weight {} of the {whom} is outside {}: {clamped} applied",
                w.origin,
                w.value,
                rule(&format!("weight range {lo}..={hi}"))
            );
            findings.push(Finding::new(Reason::OutOfPolicy, msg));
            w.value = clamped;
        }
    }
    if let Some(p) = &mut request.priority {
        let (lo, hi) = policy.memory_priority;
        if let Some(clamped) = clamp(p, lo, hi) {
            let msg = format!(
                "{}: memory priority {} of the {whom} is outside {}: {clamped} applied",
                p.origin,
                p.value,
                rule(&format!("memory priority range {lo}..={hi}"))
            );
            findings.push(Finding::new(Reason::OutOfPolicy, msg));
            p.value = clamped;
        }
    }
    if !policy.raise_limits {
        if let Some(l) = request.limits.as_mut().filter(|l| !l.origin.is_admin()) {
            let (held, raised) = hold_limits(&l.value, baseline);
            if !raised.is_empty() {
                let msg = format!(
                    "{}: limits {} of the {whom} loosen {} of the QoS default ({baseline}), which {}: {held} applied",
                    l.origin,
                    l.value,
                    raised.join(", "),
                    rule("does not allow (raise_limits = false)")
                );
                findings.push(Finding::new(Reason::OutOfPolicy, msg));
                l.value = held;
            }
        }
    }
    findings
}

/// The value clamped into `lo..=hi`, if it was outside.
fn clamp<T: Ord + Copy>(v: &Sourced<T>, lo: T, hi: T) -> Option<T> {
    let c = v.value.clamp(lo, hi);
    (c != v.value).then_some(c)
}

/// `asked` with every knob that is looser than `baseline`'s put back to the baseline's, and the
/// names of those knobs. Knobs the baseline leaves open may be set freely (that only tightens).
fn hold_limits(asked: &Limits, baseline: &Limits) -> (Limits, Vec<String>) {
    let mut held = asked.clone();
    let mut raised = Vec::new();
    for knob in Knob::ALL {
        let (a, b) = (asked.knob(knob), baseline.knob(knob));
        if b.is_set() && looser(a, b) {
            held.knobs[knob.index()] = *b;
            raised.push(knob.name().to_string());
        }
    }
    if baseline.iops_size > 0 && (asked.iops_size == 0 || asked.iops_size > baseline.iops_size) {
        held.iops_size = baseline.iops_size;
        raised.push("iops-size".to_string());
    }
    (held, raised)
}

/// Whether `a` lets more through than `b` (which is set): no rate, a higher rate, or a larger burst
/// (rate × length, a missing burst rate counting as the sustained one).
fn looser(a: &KnobLimit, b: &KnobLimit) -> bool {
    let burst = |k: &KnobLimit| k.max.max(k.avg) as u128 * k.length() as u128;
    !a.is_set() || a.avg > b.avg || burst(a) > burst(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::QosClass;
    use crate::settings::{Key, Origin};

    fn policy(weight: (u32, u32), raise_limits: bool, memory_priority: (u8, u8)) -> Policy {
        Policy {
            name: "tenants".into(),
            namespaces: vec![],
            namespace_selector: None,
            weight,
            raise_limits,
            memory_priority,
        }
    }

    fn request(pairs: &[(Key, &str)]) -> Request {
        let mut r = Request::default();
        for (k, v) in pairs {
            r.set(*k, v, Origin::Pod { key: format!("io.ioshare.dev/{k}") }).unwrap();
        }
        r
    }

    fn limits(s: &str) -> Limits {
        s.parse().unwrap()
    }

    #[test]
    fn weights_and_priorities_outside_the_ranges_are_clamped_with_a_finding_each() {
        let p = policy((10, 500), true, (0, 6));
        let mut r = request(&[(Key::Weight, "5000"), (Key::MemoryPriority, "9")]);
        let f = apply(&p, &mut r, &Limits::none(), "pod", "team-a");
        assert_eq!((r.weight.as_ref().unwrap().value, r.priority.as_ref().unwrap().value), (500, 6));
        assert_eq!(
            f.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "OutOfPolicy: annotation io.ioshare.dev/weight: weight 5000 of the pod is outside policy 'tenants' \
                 (namespace team-a) weight range 10..=500: 500 applied",
                "OutOfPolicy: annotation io.ioshare.dev/memory.priority: memory priority 9 of the pod is outside \
                 policy 'tenants' (namespace team-a) memory priority range 0..=6: 6 applied",
            ]
        );
        let mut low = request(&[(Key::Weight, "1")]);
        apply(&p, &mut low, &Limits::none(), "pod", "team-a");
        assert_eq!(low.weight.unwrap().value, 10, "clamped up too");
        let mut inside = request(&[(Key::Weight, "10"), (Key::MemoryPriority, "6")]);
        let before = inside.clone();
        assert!(apply(&p, &mut inside, &Limits::none(), "pod", "team-a").is_empty());
        assert_eq!(inside, before, "the bounds are inclusive");
        let mut nothing = Request::default();
        assert!(apply(&p, &mut nothing, &Limits::none(), "pod", "team-a").is_empty());
    }

    #[test]
    fn limits_looser_than_the_default_are_held_when_raising_is_forbidden() {
        let p = policy((1, 10000), false, (0, 12));
        let base = limits("iops-read=5000,bps-write=1000000,iops-size=4096");
        for (asked, expect, raised) in [
            ("iops-read=4000", "iops-read=4000,bps-write=1000000,iops-size=4096", "bps-write, iops-size"),
            ("iops-read=4000,bps-write=500000,iops-size=4096", "iops-read=4000,bps-write=500000,iops-size=4096", ""),
            (
                "iops-read=9000,bps-write=500000,iops-size=512",
                "iops-read=5000,bps-write=500000,iops-size=512",
                "iops-read",
            ),
            (
                "iops-read=5000,iops-read-max=6000,iops-read-max-length=2,bps-write=1000000,iops-size=4096",
                "iops-read=5000,bps-write=1000000,iops-size=4096",
                "iops-read",
            ),
            (
                "iops-read=4000,iops-write=10,bps-write=1,iops-size=4096",
                "iops-read=4000,iops-write=10,bps-write=1,iops-size=4096",
                "",
            ),
            ("none", "iops-read=5000,bps-write=1000000,iops-size=4096", "iops-read, bps-write, iops-size"),
        ] {
            let mut r = request(&[(Key::Limits, asked)]);
            let f = apply(&p, &mut r, &base, "container db", "team-a");
            assert_eq!(r.limits.as_ref().unwrap().value, limits(expect), "{asked}");
            if raised.is_empty() {
                assert!(f.is_empty(), "{asked}: {f:?}");
            } else {
                assert_eq!(f.len(), 1, "{asked}");
                let m = &f[0].message;
                assert!(m.contains(&format!("loosen {raised} of the QoS default")), "{asked}: {m}");
                assert!(
                    m.contains("of the container db") && m.contains("raise_limits = false") && m.contains(expect),
                    "{m}"
                );
            }
        }
        // Allowed: anything goes; the admin's own default is never held against itself.
        let mut r = request(&[(Key::Limits, "none")]);
        assert!(apply(&policy((1, 10000), true, (0, 12)), &mut r, &base, "pod", "x").is_empty());
        let mut admin = Request::default();
        admin.set(Key::Limits, "iops-read=9000", Origin::QosDefault(QosClass::Burstable)).unwrap();
        assert!(apply(&p, &mut admin, &base, "pod", "x").is_empty());
    }
}

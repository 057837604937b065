//! Where the cgroup hierarchies are: the v1 hierarchy of a controller and the v2 hierarchy, found in
//! `/proc/self/mountinfo`, and this process's own cgroup in them (`/proc/self/cgroup`).
//!
//! New cgroups are created below the process's own cgroup rather than the hierarchy's root, so the
//! crate works unchanged inside a container that was delegated a subtree.

use std::path::PathBuf;

/// One mounted cgroup hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupMount {
    /// The cgroup the mount shows at its mount point (`/` unless the mount is of a subtree).
    pub root: String,
    /// Where it is mounted.
    pub mount_point: PathBuf,
}

/// Which hierarchy to look for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MountedHierarchy<'a> {
    /// The v1 hierarchy that carries this controller (e.g. `blkio`).
    V1(&'a str),
    /// The unified (v2) hierarchy.
    V2,
}

/// Finds `hierarchy` in the text of a `mountinfo` file.
pub fn find_mount(mountinfo: &str, hierarchy: MountedHierarchy<'_>) -> Option<CgroupMount> {
    mountinfo.lines().find_map(|line| {
        // `ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS`
        let (left, right) = line.split_once(" - ")?;
        let left: Vec<&str> = left.split(' ').collect();
        let mut right = right.split(' ');
        let (fstype, _source, super_opts) = (right.next()?, right.next()?, right.next().unwrap_or(""));
        let wanted = match hierarchy {
            MountedHierarchy::V1(controller) => fstype == "cgroup" && super_opts.split(',').any(|o| o == controller),
            MountedHierarchy::V2 => fstype == "cgroup2",
        };
        (wanted && left.len() >= 5)
            .then(|| CgroupMount { root: unescape(left[3]), mount_point: PathBuf::from(unescape(left[4])) })
    })
}

/// Every v1 controller mounted, with its mount point (co-mounted controllers such as `cpu,cpuacct`
/// each listed), in mountinfo order.
pub fn v1_mounts(mountinfo: &str) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let left: Vec<&str> = left.split(' ').collect();
        let mut right = right.split(' ');
        let (Some("cgroup"), Some(_), Some(opts)) = (right.next(), right.next(), right.next()) else { continue };
        if left.len() < 5 {
            continue;
        }
        let point = PathBuf::from(unescape(left[4]));
        for opt in opts.split(',') {
            let controller = opt.strip_prefix("name=").unwrap_or(opt);
            let flag = matches!(opt, "rw" | "ro" | "xattr" | "noprefix" | "clone_children" | "cpuset_v2_mode");
            let known = !flag && !opt.contains('=') || opt.starts_with("name=");
            if known && !out.iter().any(|(c, _): &(String, PathBuf)| c == controller) {
                out.push((controller.to_string(), point.clone()));
            }
        }
    }
    out
}

/// The v1 mounts of this host (`/proc/self/mountinfo`).
pub(crate) fn host_v1_mounts() -> Vec<(String, PathBuf)> {
    std::fs::read_to_string("/proc/self/mountinfo").map(|m| v1_mounts(&m)).unwrap_or_default()
}

/// This process's cgroup path in `hierarchy`, from the text of a `/proc/<pid>/cgroup` file.
pub fn own_cgroup(proc_cgroup: &str, hierarchy: MountedHierarchy<'_>) -> Option<String> {
    proc_cgroup.lines().find_map(|line| {
        // `ID:CONTROLLERS:PATH`; v2 is `0::PATH`.
        let mut fields = line.splitn(3, ':');
        let (id, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let wanted = match hierarchy {
            MountedHierarchy::V1(controller) => controllers.split(',').any(|c| c == controller),
            MountedHierarchy::V2 => id == "0" && controllers.is_empty(),
        };
        wanted.then(|| path.to_string())
    })
}

/// The directory of the cgroup a process in `own` sees through `mount`: the mount point, plus the part
/// of `own` below the mount's root. A cgroup outside the mounted subtree maps to the mount point.
pub fn cgroup_dir(mount: &CgroupMount, own: &str) -> PathBuf {
    let below = own.strip_prefix(mount.root.trim_end_matches('/')).filter(|b| b.is_empty() || b.starts_with('/'));
    let below = below.unwrap_or("").trim_start_matches('/');
    if below.is_empty() {
        mount.mount_point.clone()
    } else {
        mount.mount_point.join(below)
    }
}

/// The directory of this process's own cgroup in `hierarchy`, if that hierarchy is mounted.
pub(crate) fn own_cgroup_dir(hierarchy: MountedHierarchy<'_>) -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = find_mount(&mountinfo, hierarchy)?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok();
    let own = own.as_deref().and_then(|text| own_cgroup(text, hierarchy)).unwrap_or_default();
    let dir = cgroup_dir(&mount, &own);
    Some(if dir.is_dir() { dir } else { mount.mount_point })
}

/// The mount point of `hierarchy`, if mounted.
pub(crate) fn mount_point(hierarchy: MountedHierarchy<'_>) -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    find_mount(&mountinfo, hierarchy).map(|m| m.mount_point)
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\011`, `\012`, `\134`).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        // `\ooo` up to `\377`: a larger value is no byte, so no escape (kept as text).
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d[0] <= b'3' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Lines as this machine's `/proc/self/mountinfo` has them (one made-up subtree mount added).
    const MOUNTINFO: &str = "\
25 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
34 25 0:29 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
41 34 0:36 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
42 34 0:37 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
43 34 0:38 / /sys/fs/cgroup/net_cls\\040x rw,relatime - cgroup cgroup rw,net_cls,net_prio
48 34 0:42 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn finds_v1_controller_and_v2_mounts() {
        let blkio = find_mount(MOUNTINFO, MountedHierarchy::V1("blkio")).unwrap();
        assert_eq!(blkio, CgroupMount { root: "/".into(), mount_point: "/sys/fs/cgroup/blkio".into() });
        let prio = find_mount(MOUNTINFO, MountedHierarchy::V1("net_prio")).unwrap();
        assert_eq!(prio.mount_point, Path::new("/sys/fs/cgroup/net_cls x"), "co-mounted controller, escaped space");
        assert_eq!(
            find_mount(MOUNTINFO, MountedHierarchy::V2).unwrap().mount_point,
            Path::new("/sys/fs/cgroup/unified")
        );
        assert_eq!(find_mount(MOUNTINFO, MountedHierarchy::V1("io")), None);
        assert_eq!(find_mount(MOUNTINFO, MountedHierarchy::V1("blk")), None, "whole option names only");
    }

    #[test]
    fn lists_every_v1_controller() {
        let mounts = v1_mounts(MOUNTINFO);
        let names: Vec<&str> = mounts.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(names, ["blkio", "memory", "net_cls", "net_prio"]);
        assert_eq!(mounts[3].1, Path::new("/sys/fs/cgroup/net_cls x"));
    }

    #[test]
    fn own_cgroup_and_its_directory() {
        let proc_cgroup = "7:blkio:/\n4:memory:/process_api/dd54\n2:net_cls,net_prio:/x\n0::/\n";
        assert_eq!(own_cgroup(proc_cgroup, MountedHierarchy::V1("blkio")).as_deref(), Some("/"));
        assert_eq!(own_cgroup(proc_cgroup, MountedHierarchy::V1("net_prio")).as_deref(), Some("/x"));
        assert_eq!(own_cgroup(proc_cgroup, MountedHierarchy::V2).as_deref(), Some("/"));
        let mount = CgroupMount { root: "/".into(), mount_point: "/sys/fs/cgroup/memory".into() };
        assert_eq!(cgroup_dir(&mount, "/process_api/dd54"), Path::new("/sys/fs/cgroup/memory/process_api/dd54"));
        assert_eq!(cgroup_dir(&mount, "/"), Path::new("/sys/fs/cgroup/memory"));
        // A container that sees only its subtree: the mount's root is the container's cgroup.
        let sub = CgroupMount { root: "/docker/abc".into(), mount_point: "/sys/fs/cgroup/blkio".into() };
        assert_eq!(cgroup_dir(&sub, "/docker/abc/inner"), Path::new("/sys/fs/cgroup/blkio/inner"));
        assert_eq!(cgroup_dir(&sub, "/docker/abc"), Path::new("/sys/fs/cgroup/blkio"));
        assert_eq!(cgroup_dir(&sub, "/docker/abcdef"), Path::new("/sys/fs/cgroup/blkio"), "outside the subtree");
    }
}

//! Network namespaces joined by veth pairs, for tests and benchmarks that need real
//! interfaces (multicast across them, a sender, a handler and a receiver apart). Needs root
//! (`ip netns`); everything made is removed when the [`Lab`] is dropped, whatever happened.

use std::io;
use std::process::Command;

/// Namespaces named `PREFIX-NAME`, and the veth pairs between them.
#[derive(Debug)]
pub struct Lab {
    prefix: String,
    names: Vec<String>,
}

fn ip(args: &str) -> io::Result<()> {
    let o = Command::new("ip").args(args.split_whitespace()).output()?;
    if !o.status.success() {
        return Err(io::Error::other(format!("ip {args}: {}", String::from_utf8_lossy(&o.stderr).trim())));
    }
    Ok(())
}

impl Lab {
    /// A lab whose namespaces and interfaces start with `prefix` (short: interface names
    /// hold 15 bytes).
    pub fn new(prefix: &str) -> Lab {
        Lab { prefix: prefix.to_string(), names: Vec::new() }
    }

    /// Whether this process may make namespaces (root).
    pub fn allowed() -> bool {
        Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
    }

    /// The full name of namespace `n`.
    pub fn ns(&self, n: &str) -> String {
        format!("{}-{n}", self.prefix)
    }

    /// Make namespace `n`, its loopback up.
    pub fn add(&mut self, n: &str) -> io::Result<String> {
        let name = self.ns(n);
        ip(&format!("netns add {name}"))?;
        self.names.push(name.clone());
        ip(&format!("-n {name} link set lo up"))?;
        Ok(name)
    }

    /// A veth pair from namespace `a` to `b` (interfaces `PREFIX{tag}0` and `PREFIX{tag}1`),
    /// addressed `ip_a` and `ip_b` (/24), both up.
    pub fn link(&self, a: &str, b: &str, tag: &str, ip_a: &str, ip_b: &str) -> io::Result<()> {
        let (na, nb) = (self.ns(a), self.ns(b));
        let (ea, eb) = (format!("{}{tag}0", self.prefix), format!("{}{tag}1", self.prefix));
        ip(&format!("link add {ea} netns {na} type veth peer name {eb} netns {nb}"))?;
        ip(&format!("-n {na} addr add {ip_a}/24 dev {ea}"))?;
        ip(&format!("-n {nb} addr add {ip_b}/24 dev {eb}"))?;
        ip(&format!("-n {na} link set {ea} up"))?;
        ip(&format!("-n {nb} link set {eb} up"))
    }

    /// `program args...` to run inside namespace `n`.
    pub fn command(&self, n: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(n)]).arg(program);
        c
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of every veth pair, and so the pair.
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

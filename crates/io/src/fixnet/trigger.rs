//! The trigger trader: the pipeline's `trade` consumer. Each record's entry goes through the
//! triggers; the orders they fire pass the risk checks and go out over a FIX session to the
//! exchange, whose answers are read between records.

use super::*;

/// A trigger trader's settings: the exchange, the session's ids, the triggers and the risk
/// limits.
#[derive(Debug, Clone)]
pub struct TriggerTraderConfig {
    pub exchange: SocketAddr,
    pub sender: String,
    pub target: String,
    pub begin_string: String,
    pub heartbeat_s: u32,
    /// The triggers file (`ID: conditions => buy|sell QTY`, see `tickplant_core::trigger`).
    pub triggers: std::path::PathBuf,
    pub limits: RiskLimits,
    /// The Logon's Username and Password, where the venue asks for them.
    pub credentials: Credentials,
    /// Constant fields of every order (Account, TimeInForce, ...).
    pub order_fields: Vec<(u32, String)>,
}

/// What a trigger trader did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TriggerTradeReport {
    /// Entries handed to the triggers.
    pub entries: u64,
    pub buys_sent: u64,
    pub sells_sent: u64,
    pub acks: u64,
    pub buy_fills: u64,
    pub sell_fills: u64,
    pub risk_rejects: std::collections::BTreeMap<String, u64>,
    /// Orders the exchange refused, and every refusal by its reason (as in
    /// [`TradeReport`]).
    pub rejected: u64,
    pub rejections: std::collections::BTreeMap<String, u64>,
}

/// Order entry driven by triggers on entries of any feed (the normalized events of the
/// pipeline): a FIX initiator session to an exchange, the triggers and the risk checks of
/// the tick-to-trade engine ([`Fttc`] in trigger mode), usable from any thread. Hand it
/// entries with [`TriggerTrader::on_entry`], let it read the exchange with
/// [`TriggerTrader::poll`], and log out with [`TriggerTrader::finish`].
pub struct TriggerTrader {
    tcp: TcpStream,
    session: Session<MemoryStore>,
    fttc: Fttc,
    rbuf: Vec<u8>,
    entries: u64,
    /// The exchange's refusals by reason.
    rejections: std::collections::BTreeMap<String, u64>,
}

impl std::fmt::Debug for TriggerTrader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TriggerTrader").field("entries", &self.entries).finish()
    }
}

/// The sink the engine hands its orders to: the socket, and the session's store.
struct SessionSink<'a> {
    tcp: &'a mut TcpStream,
    session: &'a mut Session<MemoryStore>,
    now: u64,
    error: Option<std::io::Error>,
}

impl FttcOutput for SessionSink<'_> {
    fn send(&mut self, seq: u64, order: &[u8]) {
        if let Err(e) = write_all(self.tcp, order) {
            self.error.get_or_insert(e);
            return;
        }
        self.session.record_sent(self.now, seq, order);
    }
}

impl TriggerTrader {
    /// Read the triggers (refusing a bad file), connect and log on (waiting up to 5 s).
    pub fn connect(cfg: &TriggerTraderConfig) -> std::io::Result<TriggerTrader> {
        let p = &cfg.triggers;
        let text =
            std::fs::read_to_string(p).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.display())))?;
        let set = parse_triggers(&text).map_err(|e| std::io::Error::other(format!("{}: {e}", p.display())))?;
        let mut triggers = Triggers::new();
        triggers.apply(&set).map_err(|e| std::io::Error::other(format!("{}: {e}", p.display())))?;
        let mut fttc = Fttc::new(FttcConfig {
            begin_string: cfg.begin_string.clone(),
            sender: cfg.sender.clone(),
            target: cfg.target.clone(),
            qty: 1,
            limits: cfg.limits,
            order_fields: cfg.order_fields.clone(),
        });
        fttc.set_triggers(Some(triggers));
        fttc.set_next_cl_ord_id(first_cl_ord_id(&[], unix_ns()));
        let tcp = TcpStream::connect(cfg.exchange)
            .map_err(|e| std::io::Error::new(e.kind(), format!("exchange {}: {e}", cfg.exchange)))?;
        tcp.set_nodelay(true)?;
        tcp.set_nonblocking(true)?;
        let mut scfg = SessionConfig::new(Role::Initiator, &cfg.sender, &cfg.target);
        scfg.begin_string = cfg.begin_string.clone();
        scfg.heartbeat_s = cfg.heartbeat_s;
        scfg.logon_fields = cfg.credentials.logon_fields();
        let mut t = TriggerTrader {
            tcp,
            session: Session::new(scfg, MemoryStore::default()),
            fttc,
            rbuf: vec![0u8; 65_536],
            entries: 0,
            rejections: Default::default(),
        };
        t.session.handle_connected(unix_ns());
        flush(&mut t.session, &mut t.tcp)?;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if t.poll()? {
                return Ok(t);
            }
            if Instant::now() >= deadline {
                return Err(std::io::Error::new(
                    ErrorKind::TimedOut,
                    format!("exchange {}: no Logon in 5 s", cfg.exchange),
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The control socket's `triggers`: list the triggers in force, add one
    /// (`ID: conditions => buy|sell QTY`) or remove some; a refused change changes nothing.
    pub fn change_triggers(&mut self, op: &crate::control::TriggerOp) -> Result<serde_json::Value, String> {
        use crate::control::TriggerOp;
        let Some(t) = self.fttc.triggers_mut() else { return Err("no triggers in force".to_string()) };
        let mut set = t.set();
        let list = |set: &tickplant_core::trigger::TriggerSet| -> Vec<String> {
            set.iter()
                .map(|(id, cond, a)| format!("{id}: {cond} => {} {}", if a.buy { "buy" } else { "sell" }, a.qty))
                .collect()
        };
        let (key, ids) = match op {
            TriggerOp::List => return Ok(serde_json::json!({ "triggers": list(&set) })),
            TriggerOp::Add(text) => {
                let new = parse_triggers(text).map_err(|e| e.to_string().replacen("line 1: ", "", 1))?;
                let [(id, _, _)] = new.as_slice() else { return Err("one trigger at a time".to_string()) };
                if set.iter().any(|x| x.0 == *id) {
                    return Err(format!("trigger {id} is in force: remove it first"));
                }
                let id = *id;
                set.extend(new);
                ("added", vec![id])
            }
            TriggerOp::Remove(ids) => {
                if let Some(id) = ids.iter().find(|id| !set.iter().any(|x| x.0 == **id)) {
                    return Err(format!("no trigger {id} is in force"));
                }
                set.retain(|x| !ids.contains(&x.0));
                ("removed", ids.clone())
            }
        };
        t.apply(&set).map_err(|e| e.to_string())?;
        Ok(serde_json::json!({ key: ids, "triggers": list(&t.set()) }))
    }

    /// Run an entry through the triggers; fired ones go out as orders. Returns the orders.
    pub fn on_entry(&mut self, entry: &tickplant_core::trigger::Entry<'_>) -> std::io::Result<usize> {
        self.entries += 1;
        let now = unix_ns();
        let mut sink = SessionSink { tcp: &mut self.tcp, session: &mut self.session, now, error: None };
        let mut seq = sink.session.next_sender_seq();
        let n = self.fttc.on_entry(now, entry, &mut seq, &mut sink);
        match sink.error {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    /// Read what the exchange sent (acknowledgements, fills, session messages), keep the
    /// session alive, write what it has to say. True once logged on.
    pub fn poll(&mut self) -> std::io::Result<bool> {
        loop {
            match self.tcp.read(&mut self.rbuf) {
                Ok(0) => {
                    return Err(std::io::Error::new(ErrorKind::UnexpectedEof, "the exchange closed the connection"))
                }
                Ok(n) => self.session.handle_bytes(unix_ns(), &self.rbuf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        let mut logged_on = self.session.is_active();
        while let Some(ev) = self.session.poll_event() {
            match ev {
                SessionEvent::LoggedOn => logged_on = true,
                SessionEvent::App { msg_type, message, .. } if msg_type == b"8" => {
                    let now = unix_ns();
                    let mut sink = SessionSink { tcp: &mut self.tcp, session: &mut self.session, now, error: None };
                    let mut seq = sink.session.next_sender_seq();
                    let rejected = self.fttc.stats().rejected;
                    let _ = self.fttc.on_execution(now, &message, &mut seq, &mut sink);
                    if let Some(e) = sink.error {
                        return Err(e);
                    }
                    if self.fttc.stats().rejected > rejected {
                        rejection_reason(&message, &mut self.rejections);
                    }
                }
                SessionEvent::App { msg_type, message, .. } => {
                    refusal(&msg_type, &message, &self.session, &mut self.fttc, &mut self.rejections);
                }
                SessionEvent::RejectedByCounterparty { ref_seq, reason } => {
                    refused(ref_seq, reason, &self.session, &mut self.fttc, &mut self.rejections);
                }
                SessionEvent::LoggedOut { reason } => {
                    return Err(session_ended(&reason));
                }
                _ => {}
            }
        }
        if let Some(t) = self.session.poll_timeout() {
            if unix_ns() >= t {
                self.session.handle_timeout(unix_ns());
            }
        }
        flush(&mut self.session, &mut self.tcp)?;
        Ok(logged_on)
    }

    /// Wait (up to `wait`) until every order sent is acknowledged, log out, and report.
    pub fn finish(mut self, wait: Duration) -> std::io::Result<TriggerTradeReport> {
        let deadline = Instant::now() + wait;
        loop {
            self.poll()?;
            let st = self.fttc.stats();
            if st.acks + st.rejected >= st.buys + st.sells || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.session.logout(unix_ns(), "done");
        flush(&mut self.session, &mut self.tcp)?;
        let until = Instant::now() + Duration::from_secs(2);
        while !self.session.is_closed() && Instant::now() < until {
            match self.poll() {
                Ok(_) => std::thread::sleep(Duration::from_millis(1)),
                Err(_) => break,
            }
        }
        let st = self.fttc.stats();
        Ok(TriggerTradeReport {
            entries: self.entries,
            buys_sent: st.buys,
            sells_sent: st.sells,
            acks: st.acks,
            buy_fills: st.buy_fills,
            sell_fills: st.sell_fills,
            risk_rejects: refusals(&self.fttc),
            rejected: st.rejected,
            rejections: std::mem::take(&mut self.rejections),
        })
    }
}

// A QuickFIX/J acceptor playing the exchange for `tickplant trade`: every incoming message
// is validated against QuickFIX/J's FIX 4.2/4.4 data dictionary (a fault is answered with a
// Reject, logged here); each NewOrderSingle is acknowledged at once and filled after a delay,
// sent whether or not the session is logged on then (QuickFIX/J keeps it for a resend).
//
// java Exch BEGIN_STRING PORT FILL_DELAY_MS SECONDS STORE_DIR LOG_FILE [reject]
// With -Dpartial=true, each fill comes in two parts: 40% (OrdStatus Partially filled), then
// the rest 50 ms later.
// With -Duser=U -Dpassword=P, a Logon without that Username (553) and Password (554) is
// refused (a Logout whose Text says so).
// With `reject`, every order is rejected instead (an ExecutionReport with OrdStatus Rejected,
// OrdRejReason 1 and the Text "unknown symbol").
// The log has one line per event: LOGON, LOGOUT, ORDER <ClOrdID> <Side> <Symbol> <OrderQty>
// <PossDupFlag> <Account or -> <TimeInForce or ->, REJECT <the message>, REFUSED <why>; the
// last line is DONE.
import quickfix.*;
import quickfix.field.*;
import java.io.*;
import java.util.concurrent.*;

public class Exch extends MessageCracker implements Application {
    static PrintWriter log;
    static long fillDelayMs;
    static long execId;
    static boolean rejectAll;
    static final ScheduledExecutorService later = Executors.newSingleThreadScheduledExecutor();

    static synchronized void say(String s) {
        log.println(s);
        log.flush();
    }

    public void onCreate(SessionID s) {}
    public void onLogon(SessionID s) { say("LOGON"); }
    public void onLogout(SessionID s) { say("LOGOUT"); }
    public void toAdmin(Message m, SessionID s) {
        try {
            String t = m.getHeader().getString(MsgType.FIELD);
            if (t.equals(MsgType.REJECT)) say("REJECT " + m.toString().replace('\001', '|'));
        } catch (FieldNotFound e) {}
    }
    public void fromAdmin(Message m, SessionID s) throws RejectLogon, FieldNotFound {
        String user = System.getProperty("user");
        if (user == null || !m.getHeader().getString(MsgType.FIELD).equals(MsgType.LOGON)) return;
        String u = m.isSetField(Username.FIELD) ? m.getString(Username.FIELD) : "";
        String p = m.isSetField(Password.FIELD) ? m.getString(Password.FIELD) : "";
        if (!u.equals(user) || !p.equals(System.getProperty("password"))) {
            say("REFUSED bad credentials for " + u);
            throw new RejectLogon("bad credentials");
        }
    }
    public void toApp(Message m, SessionID s) {}
    public void fromApp(Message m, SessionID s) throws FieldNotFound, IncorrectTagValue, UnsupportedMessageType {
        crack(m, s);
    }

    static synchronized String nextExecId() { return "E" + (++execId); }

    void order(Message o, SessionID s) throws FieldNotFound {
        String id = o.getString(ClOrdID.FIELD);
        char side = o.getChar(Side.FIELD);
        String sym = o.getString(Symbol.FIELD);
        double qty = o.getDouble(OrderQty.FIELD);
        boolean dup = o.getHeader().isSetField(PossDupFlag.FIELD) && o.getHeader().getBoolean(PossDupFlag.FIELD);
        String account = o.isSetField(Account.FIELD) ? o.getString(Account.FIELD) : "-";
        String tif = o.isSetField(TimeInForce.FIELD) ? o.getString(TimeInForce.FIELD) : "-";
        say("ORDER " + id + " " + side + " " + sym + " " + (long) qty + " " + (dup ? "Y" : "N") + " " + account + " " + tif);
        boolean fix42 = s.getBeginString().equals("FIX.4.2");
        if (rejectAll) {
            Message r = report(fix42, id, side, sym, qty, false);
            r.setChar(ExecType.FIELD, ExecType.REJECTED);
            r.setChar(OrdStatus.FIELD, OrdStatus.REJECTED);
            r.setDouble(LeavesQty.FIELD, 0);
            r.setInt(OrdRejReason.FIELD, OrdRejReason.UNKNOWN_SYMBOL);
            r.setString(Text.FIELD, "unknown symbol");
            send(r, s);
            return;
        }
        send(report(fix42, id, side, sym, qty, false), s);
        Message fill = report(fix42, id, side, sym, qty, true);
        long at = fillDelayMs;
        if (Boolean.getBoolean("partial")) {
            double part = Math.floor(qty * 0.4);
            Message first = report(fix42, id, side, sym, qty, true);
            first.setChar(ExecType.FIELD, fix42 ? ExecType.PARTIAL_FILL : ExecType.TRADE);
            first.setChar(OrdStatus.FIELD, OrdStatus.PARTIALLY_FILLED);
            first.setDouble(LastQty.FIELD, part);
            first.setDouble(CumQty.FIELD, part);
            first.setDouble(LeavesQty.FIELD, qty - part);
            fill.setDouble(LastQty.FIELD, qty - part);
            later.schedule(() -> send(first, s), at, java.util.concurrent.TimeUnit.MILLISECONDS);
            at += 50;
        }
        later.schedule(() -> send(fill, s), at, java.util.concurrent.TimeUnit.MILLISECONDS);
    }

    static Message report(boolean fix42, String id, char side, String sym, double qty, boolean filled) {
        Message r = new Message();
        r.getHeader().setString(MsgType.FIELD, MsgType.EXECUTION_REPORT);
        r.setString(OrderID.FIELD, "O" + id);
        r.setString(ClOrdID.FIELD, id);
        r.setString(ExecID.FIELD, nextExecId());
        if (fix42) r.setChar(ExecTransType.FIELD, ExecTransType.NEW);
        r.setChar(ExecType.FIELD, filled ? (fix42 ? ExecType.FILL : ExecType.TRADE) : ExecType.NEW);
        r.setChar(OrdStatus.FIELD, filled ? OrdStatus.FILLED : OrdStatus.NEW);
        r.setString(Symbol.FIELD, sym);
        r.setChar(Side.FIELD, side);
        r.setDouble(OrderQty.FIELD, qty);
        r.setDouble(LeavesQty.FIELD, filled ? 0 : qty);
        r.setDouble(CumQty.FIELD, filled ? qty : 0);
        r.setDouble(AvgPx.FIELD, filled ? 100.0 : 0);
        if (filled) {
            r.setDouble(LastQty.FIELD, qty);
            r.setDouble(LastPx.FIELD, 100.0);
        }
        return r;
    }

    static void send(Message m, SessionID s) {
        try {
            Session.sendToTarget(m, s);
        } catch (SessionNotFound e) {
            say("ERROR " + e);
        }
    }

    public void onMessage(quickfix.fix44.NewOrderSingle o, SessionID s) throws FieldNotFound { order(o, s); }
    public void onMessage(quickfix.fix42.NewOrderSingle o, SessionID s) throws FieldNotFound { order(o, s); }

    public static void main(String[] a) throws Exception {
        String begin = a[0];
        fillDelayMs = Long.parseLong(a[2]);
        rejectAll = a.length > 6 && a[6].equals("reject");
        log = new PrintWriter(new FileWriter(a[5], true));
        SessionSettings ss = new SessionSettings();
        SessionID id = new SessionID(begin, "EXCH", "TICKPLANT");
        ss.setString(id, "ConnectionType", "acceptor");
        ss.setString(id, "SocketAcceptAddress", "127.0.0.1");
        ss.setString(id, "SocketAcceptPort", a[1]);
        ss.setString(id, "FileStorePath", a[4]);
        Common.validating(ss, id, begin);
        Acceptor acc = new SocketAcceptor(new Exch(), new FileStoreFactory(ss), ss, new SLF4JLogFactory(ss), new DefaultMessageFactory());
        acc.start();
        say("LISTENING");
        Thread.sleep(Long.parseLong(a[3]) * 1000);
        acc.stop(true);
        later.shutdownNow();
        say("DONE");
        log.close();
    }
}

// A QuickFIX/J initiator trading on `tickplant sim exchange`: it sends ORDERS
// NewOrderSingles (limit orders, BUY and SELL in turn) and validates every ExecutionReport
// against QuickFIX/J's data dictionary (a fault is answered with a Reject, logged here).
//
// java Client BEGIN_STRING PORT ORDERS LOG_FILE [STORE_DIR [ID_PREFIX [REPORTS_PER_ORDER]]]
// With STORE_DIR, the session's sequence numbers are kept there (QuickFIX/J's file store):
// a second run goes on from the first's, as an engine reconnecting during the day does.
// ClOrdIDs are ID_PREFIX (C unless given) and the order's number: a venue refuses a
// ClOrdID used before in its day, so a second run names its orders anew. It waits for
// REPORTS_PER_ORDER ExecutionReports an order (2: the acknowledgement and the fill; 1 for
// orders the exchange is to refuse).
// The log has one line per event: LOGON, EXEC <ClOrdID> <ExecType> <OrdStatus> <CumQty>,
// REJECT <the message>, LOGOUT; the last line is DONE <ExecutionReports received>, or
// NO LOGON.
import quickfix.*;
import quickfix.field.*;
import java.io.*;
import java.util.concurrent.*;

public class Client implements Application {
    static PrintWriter log;
    static final CountDownLatch logon = new CountDownLatch(1);
    static CountDownLatch reports;
    static volatile SessionID sid;

    static synchronized void say(String s) {
        log.println(s);
        log.flush();
    }

    public void onCreate(SessionID s) {}
    public void onLogon(SessionID s) { sid = s; say("LOGON"); logon.countDown(); }
    public void onLogout(SessionID s) { say("LOGOUT"); }
    public void toAdmin(Message m, SessionID s) {
        try {
            if (m.getHeader().getString(MsgType.FIELD).equals(MsgType.REJECT)) say("REJECT " + m.toString().replace('\001', '|'));
        } catch (FieldNotFound e) {}
    }
    public void fromAdmin(Message m, SessionID s) {}
    public void toApp(Message m, SessionID s) {}
    public void fromApp(Message m, SessionID s) throws FieldNotFound {
        if (m.getHeader().getString(MsgType.FIELD).equals(MsgType.EXECUTION_REPORT)) {
            say("EXEC " + m.getString(ClOrdID.FIELD) + " " + m.getChar(ExecType.FIELD) + " " + m.getChar(OrdStatus.FIELD)
                + " " + (long) m.getDouble(CumQty.FIELD));
            reports.countDown();
        }
    }

    public static void main(String[] a) throws Exception {
        String begin = a[0];
        int n = Integer.parseInt(a[2]);
        int per = a.length > 6 ? Integer.parseInt(a[6]) : 2;
        reports = new CountDownLatch(per * n);
        log = new PrintWriter(new FileWriter(a[3], true));
        SessionSettings ss = new SessionSettings();
        SessionID id = new SessionID(begin, "TICKPLANT", "EXCH");
        ss.setString(id, "ConnectionType", "initiator");
        ss.setString(id, "SocketConnectHost", "127.0.0.1");
        ss.setString(id, "SocketConnectPort", a[1]);
        ss.setString(id, "HeartBtInt", "1");
        ss.setString(id, "ReconnectInterval", "1");
        Common.validating(ss, id, begin);
        MessageStoreFactory store = new MemoryStoreFactory();
        if (a.length > 4) {
            ss.setString(id, "FileStorePath", a[4]);
            store = new FileStoreFactory(ss);
        }
        Initiator ini = new SocketInitiator(new Client(), store, ss, new SLF4JLogFactory(ss), new DefaultMessageFactory());
        ini.start();
        if (!logon.await(20, java.util.concurrent.TimeUnit.SECONDS)) {
            say("NO LOGON");
            ini.stop(true);
            log.close();
            System.exit(1);
        }
        for (int i = 0; i < n; i++) {
            Message o = new Message();
            o.getHeader().setString(MsgType.FIELD, MsgType.ORDER_SINGLE);
            o.setString(ClOrdID.FIELD, (a.length > 5 ? a[5] : "C") + i);
            if (begin.equals("FIX.4.2")) o.setChar(HandlInst.FIELD, HandlInst.AUTOMATED_EXECUTION_ORDER_PRIVATE_NO_BROKER_INTERVENTION);
            o.setString(Symbol.FIELD, "S" + (i % 7));
            o.setChar(Side.FIELD, i % 2 == 0 ? Side.BUY : Side.SELL);
            o.setUtcTimeStamp(TransactTime.FIELD, java.time.LocalDateTime.now(java.time.ZoneOffset.UTC));
            o.setDouble(OrderQty.FIELD, 100 + i);
            o.setChar(OrdType.FIELD, OrdType.LIMIT);
            o.setDouble(Price.FIELD, 10.25 + i);
            Session.sendToTarget(o, sid);
        }
        boolean all = reports.await(20, java.util.concurrent.TimeUnit.SECONDS);
        // Three heartbeat intervals with nothing to send: heartbeats and test requests both ways.
        Thread.sleep(3500);
        ini.stop();
        say("DONE " + (per * n - reports.getCount()));
        log.close();
    }
}

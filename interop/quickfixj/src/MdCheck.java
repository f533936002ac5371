// Validates FIX market data from a multicast group against QuickFIX/J's FIX 4.4 data
// dictionary, one message a datagram, until the group is quiet for three seconds.
//
// java MdCheck GROUP PORT INTERFACE LOG_FILE
// The log has BAD <error> :: <message> for each message that fails (the first ten), then
// DONE <messages> <bad>.
import quickfix.*;
import java.io.*;
import java.net.*;

public class MdCheck {
    public static void main(String[] a) throws Exception {
        PrintWriter log = new PrintWriter(new FileWriter(a[3], true));
        DataDictionary dd = new DataDictionary("FIX44.xml");
        dd.setCheckUserDefinedFields(true);
        dd.setCheckFieldsOutOfOrder(true);
        MulticastSocket s = new MulticastSocket(Integer.parseInt(a[1]));
        s.setReceiveBufferSize(16 << 20);
        s.joinGroup(new InetSocketAddress(a[0], 0), NetworkInterface.getByName(a[2]));
        log.println("LISTENING");
        log.flush();
        byte[] b = new byte[65536];
        long n = 0, bad = 0;
        // Quiet for 20 s before the first datagram, 3 s after.
        s.setSoTimeout(20000);
        try {
            while (true) {
                DatagramPacket p = new DatagramPacket(b, b.length);
                s.receive(p);
                s.setSoTimeout(3000);
                String m = new String(p.getData(), 0, p.getLength(), "ISO-8859-1");
                n++;
                try {
                    dd.validate(new Message(m, dd, true));
                } catch (Exception e) {
                    if (bad++ < 10) log.println("BAD " + e + " :: " + m.replace('\001', '|'));
                }
            }
        } catch (SocketTimeoutException e) {
        }
        log.println("DONE " + n + " " + bad);
        log.close();
    }
}

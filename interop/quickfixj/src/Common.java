// What the interop programs' sessions share: the whole day, QuickFIX/J's data dictionary of
// the BeginString, every check it has on.
import quickfix.*;

final class Common {
    private Common() {}

    static void validating(SessionSettings ss, SessionID id, String begin) {
        ss.setString(id, "StartTime", "00:00:00");
        ss.setString(id, "EndTime", "00:00:00");
        ss.setString(id, "UseDataDictionary", "Y");
        ss.setString(id, "DataDictionary", begin.replace(".", "") + ".xml");
        ss.setString(id, "ValidateUserDefinedFields", "Y");
        ss.setString(id, "ValidateFieldsOutOfOrder", "Y");
        ss.setString(id, "ValidateFieldsHaveValues", "Y");
    }
}

// The ACLs of the secured local broker (squall kafka up --secure), created through Kafka's Admin API.
//
//   java -cp '<libs>/*' kafka/SquallAcls.java ADMIN_PROPERTIES 'PRINCIPAL PERMISSION OPERATION RESOURCE PATTERN NAME'...
//
// Run by squall.tools.kafka_secure once, after the broker's first secured start: Kafka 4 has no
// AclCommand in the broker's jars and aiokafka speaks only CreateAcls versions Kafka 4 no longer
// accepts. ADMIN_PROPERTIES is an Admin client configuration (bootstrap.servers, TLS, SASL); each
// further argument is one ACL, e.g. "User:viewer ALLOW DESCRIBE GROUP PREFIXED squall". Exit 0 when
// every ACL exists (creating an existing ACL is a no-op), 1 with the reason on standard error.
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

public class SquallAcls {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (InputStream in = Files.newInputStream(Paths.get(args[0]))) {
            props.load(in);
        }
        List<AclBinding> acls = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            String[] f = args[i].trim().split("\\s+");
            if (f.length != 6) {
                System.err.println("SquallAcls: expected 6 fields, got: " + args[i]);
                System.exit(1);
            }
            ResourcePattern resource = new ResourcePattern(
                ResourceType.fromString(f[3]), f[5], PatternType.fromString(f[4]));
            AccessControlEntry entry = new AccessControlEntry(
                f[0], "*", AclOperation.fromString(f[2]), AclPermissionType.fromString(f[1]));
            acls.add(new AclBinding(resource, entry));
        }
        try (Admin admin = Admin.create(props)) {
            admin.createAcls(acls).all().get(60, TimeUnit.SECONDS);
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            System.err.println("SquallAcls: " + cause.getClass().getSimpleName() + ": " + cause.getMessage());
            System.exit(1);
        }
        System.out.println("SquallAcls: " + acls.size() + " ACLs in place");
    }
}

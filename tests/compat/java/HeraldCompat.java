import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java client against a broker: Admin createTopics / describeTopics / describeConfigs,
 * a producer with the default config (idempotence on, acks=all) and a consumer with
 * assign() that reads every record back.
 *
 * <p>Usage: {@code HeraldCompat BOOTSTRAP TOPIC RECORDS}. Prints one line
 * {@code HERALD-COMPAT java ok key=value ...} and exits 0, or prints
 * {@code HERALD-COMPAT java FAIL: reason} and exits 1 at the first mismatch.
 */
public final class HeraldCompat {
  static final int PARTITIONS = 3;
  static final String RETENTION_MS = "3600000";
  static final long TIMEOUT_S = 30;
  static final long CONSUME_DEADLINE_MS = 120_000;

  static final class Mismatch extends Exception {
    private static final long serialVersionUID = 1L;

    Mismatch(String message) {
      super(message);
    }
  }

  static void check(boolean ok, String message) throws Mismatch {
    if (!ok) {
      throw new Mismatch(message);
    }
  }

  /**
   * Every client's settings: the bootstrap servers, and the properties in the file that
   * {@code HERALD_COMPAT_CLIENT_PROPS} names, if set (security settings, as an operator
   * would give them: security.protocol, sasl.*, ssl.*).
   */
  static Properties base(String bootstrap) throws java.io.IOException {
    Properties props = new Properties();
    String extra = System.getenv("HERALD_COMPAT_CLIENT_PROPS");
    if (extra != null && !extra.isEmpty()) {
      try (var in = java.nio.file.Files.newBufferedReader(java.nio.file.Path.of(extra))) {
        props.load(in);
      }
    }
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    return props;
  }

  static byte[] key(int i) {
    return ("key-" + (i % 100)).getBytes(StandardCharsets.UTF_8);
  }

  static byte[] value(int i) {
    return ("java-value-" + i + "-" + "x".repeat(i % 200)).getBytes(StandardCharsets.UTF_8);
  }

  public static void main(String[] args) {
    if (args.length != 3) {
      System.out.println("HERALD-COMPAT java FAIL: usage: HeraldCompat BOOTSTRAP TOPIC RECORDS");
      System.exit(2);
    }
    try {
      String summary = run(args[0], args[1], Integer.parseInt(args[2]));
      System.out.println("HERALD-COMPAT java ok " + summary);
      System.exit(0);
    } catch (Mismatch e) {
      System.out.println("HERALD-COMPAT java FAIL: " + e.getMessage());
    } catch (Exception e) {
      System.out.println("HERALD-COMPAT java FAIL: " + e);
      e.printStackTrace(System.out);
    }
    System.exit(1);
  }

  static String run(String bootstrap, String topic, int records) throws Exception {
    Uuid topicId = createAndDescribe(bootstrap, topic);
    RecordMetadata[] delivered = produce(bootstrap, topic, records);
    int consumed = consumeAll(bootstrap, topic, delivered);
    return String.format(
        "topic_id=%s partitions=%d produced=%d consumed=%d", topicId, PARTITIONS, records, consumed);
  }

  static Uuid createAndDescribe(String bootstrap, String topic) throws Exception {
    Properties props = base(bootstrap);
    try (Admin admin = Admin.create(props)) {
      NewTopic newTopic =
          new NewTopic(topic, PARTITIONS, (short) 1).configs(Map.of("retention.ms", RETENTION_MS));
      CreateTopicsResult created = admin.createTopics(List.of(newTopic));
      created.all().get(TIMEOUT_S, TimeUnit.SECONDS);
      Uuid createdId = created.topicId(topic).get(TIMEOUT_S, TimeUnit.SECONDS);
      check(created.numPartitions(topic).get() == PARTITIONS, "createTopics reported wrong partitions");

      TopicDescription description =
          admin.describeTopics(List.of(topic)).allTopicNames().get(TIMEOUT_S, TimeUnit.SECONDS).get(topic);
      check(description.partitions().size() == PARTITIONS,
          "describeTopics: " + description.partitions().size() + " partitions, expected " + PARTITIONS);
      check(!Uuid.ZERO_UUID.equals(description.topicId()), "describeTopics: topic has no id");
      check(description.topicId().equals(createdId),
          "describeTopics id " + description.topicId() + " != createTopics id " + createdId);
      for (var partition : description.partitions()) {
        check(partition.leader() != null && partition.leader().id() >= 0,
            "describeTopics: partition " + partition.partition() + " has no leader");
      }

      ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
      Config config =
          admin.describeConfigs(List.of(resource)).all().get(TIMEOUT_S, TimeUnit.SECONDS).get(resource);
      check(config.get("retention.ms") != null, "describeConfigs: no retention.ms");
      check(RETENTION_MS.equals(config.get("retention.ms").value()),
          "describeConfigs: retention.ms=" + config.get("retention.ms").value());
      check(config.get("cleanup.policy") != null
              && "delete".equals(config.get("cleanup.policy").value()),
          "describeConfigs: cleanup.policy is not delete");
      return createdId;
    }
  }

  static RecordMetadata[] produce(String bootstrap, String topic, int records) throws Exception {
    Properties props = base(bootstrap);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    List<Future<RecordMetadata>> futures = new ArrayList<>(records);
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
      for (int i = 0; i < records; i++) {
        ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(topic, key(i), value(i));
        record.headers().add("i", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
        futures.add(producer.send(record));
      }
      producer.flush();
    }
    RecordMetadata[] delivered = new RecordMetadata[records];
    Map<Integer, Long> nextOffset = new HashMap<>();
    for (int i = 0; i < records; i++) {
      RecordMetadata md = futures.get(i).get(TIMEOUT_S, TimeUnit.SECONDS);
      long expected = nextOffset.getOrDefault(md.partition(), 0L);
      check(md.offset() == expected, "record " + i + " acknowledged at " + md.partition() + "/"
          + md.offset() + ", expected offset " + expected + " (offsets must be dense, in send order)");
      nextOffset.put(md.partition(), expected + 1);
      delivered[i] = md;
    }
    return delivered;
  }

  static int consumeAll(String bootstrap, String topic, RecordMetadata[] delivered) throws Exception {
    Properties props = base(bootstrap);
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    List<TopicPartition> partitions = new ArrayList<>();
    for (int p = 0; p < PARTITIONS; p++) {
      partitions.add(new TopicPartition(topic, p));
    }
    boolean[] seen = new boolean[delivered.length];
    Map<Integer, Long> lastOffset = new HashMap<>();
    int consumed = 0;
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      Map<TopicPartition, Long> ends = consumer.endOffsets(partitions, Duration.ofSeconds(TIMEOUT_S));
      long total = ends.values().stream().mapToLong(Long::longValue).sum();
      check(total == delivered.length, "endOffsets sum to " + total + ", produced " + delivered.length);
      long deadline = System.currentTimeMillis() + CONSUME_DEADLINE_MS;
      while (consumed < delivered.length) {
        check(System.currentTimeMillis() < deadline,
            "consumed " + consumed + " of " + delivered.length + " before the deadline");
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
          checkRecord(r, delivered, seen, lastOffset);
          consumed++;
        }
      }
    }
    return consumed;
  }

  static void checkRecord(ConsumerRecord<byte[], byte[]> r, RecordMetadata[] delivered,
      boolean[] seen, Map<Integer, Long> lastOffset) throws Mismatch {
    String where = r.partition() + "/" + r.offset();
    Header header = r.headers().lastHeader("i");
    check(header != null, "record at " + where + " has no i header");
    int i = Integer.parseInt(new String(header.value(), StandardCharsets.UTF_8));
    check(i >= 0 && i < delivered.length, "record at " + where + " has unknown index " + i);
    check(!seen[i], "record " + i + " consumed twice");
    seen[i] = true;
    check(delivered[i].partition() == r.partition() && delivered[i].offset() == r.offset(),
        "record " + i + " read at " + where + ", acknowledged at "
            + delivered[i].partition() + "/" + delivered[i].offset());
    long last = lastOffset.getOrDefault(r.partition(), -1L);
    check(r.offset() > last, "partition " + r.partition() + ": offset " + r.offset() + " after " + last);
    lastOffset.put(r.partition(), r.offset());
    check(Arrays.equals(r.key(), key(i)), "record " + i + ": key differs");
    check(Arrays.equals(r.value(), value(i)), "record " + i + ": value differs");
    check(r.timestamp() == delivered[i].timestamp(),
        "record " + i + ": timestamp " + r.timestamp() + " != " + delivered[i].timestamp());
  }

  private HeraldCompat() {}
}

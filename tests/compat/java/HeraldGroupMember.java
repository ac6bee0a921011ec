import java.io.FileOutputStream;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One member of a consumer group (classic protocol, CooperativeStickyAssignor), run as its own
 * JVM by tests/compat/test_java_group.py.
 *
 * <p>Usage: {@code HeraldGroupMember BOOTSTRAP TOPIC GROUP NAME OUT_FILE}. Subscribes to TOPIC
 * and consumes until SIGTERM, then closes the consumer (which revokes its partitions and leaves
 * the group). Everything it does is appended to OUT_FILE as JSON lines, flushed line by line
 * (the same shape as the members of test_consumer_groups.py):
 *
 * <ul>
 *   <li>{@code {"t": T, "ev": "assign"|"revoke"|"lost", "p": [partitions]}} from the rebalance
 *       listener (with the cooperative protocol only the partitions added or taken away); a
 *       "revoke" line also says whether the commit made on revocation succeeded
 *       ({@code "committed": true|false});
 *   <li>{@code {"t": T, "msgs": [[partition, offset, value], ...]}}: records processed, written
 *       before their offsets are committed (synchronously);
 *   <li>{@code {"t": T, "commit_error": "..."}}: a commit refused (the records come again);
 *   <li>{@code {"t": T, "ev": "closed", "p": []}} once the consumer is closed.
 * </ul>
 *
 * <p>T is the wall clock in seconds (comparable with Python's time.time()). Partitions taken
 * away cleanly are committed in onPartitionsRevoked, before the "revoke" line is written, so
 * their next owner starts right after the last record processed here.
 */
public final class HeraldGroupMember {
  static final Duration POLL = Duration.ofMillis(200);
  static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(20);

  private final PrintWriter out;
  /** Next offset to commit, per partition: after the last record processed. */
  private final Map<TopicPartition, OffsetAndMetadata> processed = new HashMap<>();

  private KafkaConsumer<String, String> consumer;

  HeraldGroupMember(PrintWriter out) {
    this.out = out;
  }

  static String quote(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c < 0x20) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    return b.append('"').toString();
  }

  static String now() {
    return String.format("%.3f", System.currentTimeMillis() / 1000.0);
  }

  synchronized void line(String fields) {
    out.println("{\"t\": " + now() + ", " + fields + "}");
    out.flush();
  }

  void event(String kind, Collection<TopicPartition> partitions) {
    event(kind, partitions, "");
  }

  void event(String kind, Collection<TopicPartition> partitions, String extra) {
    TreeSet<Integer> sorted = new TreeSet<>();
    for (TopicPartition tp : partitions) {
      sorted.add(tp.partition());
    }
    line("\"ev\": " + quote(kind) + ", \"p\": " + sorted + extra);
  }

  void error(String field, Exception e) {
    line(quote(field) + ": " + quote(e.toString()));
  }

  /** Commits what was processed on these partitions; false when the commit was refused. */
  boolean commit(Collection<TopicPartition> partitions) {
    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
    for (TopicPartition tp : partitions) {
      OffsetAndMetadata next = processed.get(tp);
      if (next != null) {
        offsets.put(tp, next);
      }
    }
    if (offsets.isEmpty()) {
      return true;
    }
    try {
      consumer.commitSync(offsets);
      return true;
    } catch (KafkaException e) {
      // CommitFailedException, RebalanceInProgressException, ...: the records come again.
      error("commit_error", e);
      return false;
    }
  }

  void run(String bootstrap, String topic, String group, String name, AtomicBoolean stopping) {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    props.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
    props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
    props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
        CooperativeStickyAssignor.class.getName());
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    // The smallest session timeout a broker accepts by default: a killed member is noticed soon.
    props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
    props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
    props.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "30000");
    props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "500");
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());

    consumer = new KafkaConsumer<>(props);
    consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
      @Override
      public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        if (partitions.isEmpty()) {
          return;
        }
        // Hand over cleanly: commit what was processed, then stop owning.
        boolean committed = commit(partitions);
        for (TopicPartition tp : partitions) {
          processed.remove(tp);
        }
        event("revoke", partitions, ", \"committed\": " + committed);
      }

      @Override
      public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        event("assign", partitions);
      }

      @Override
      public void onPartitionsLost(Collection<TopicPartition> partitions) {
        for (TopicPartition tp : partitions) {
          processed.remove(tp);
        }
        event("lost", partitions);
      }
    });

    while (!stopping.get()) {
      ConsumerRecords<String, String> records = consumer.poll(POLL);
      if (records.isEmpty()) {
        continue;
      }
      List<String> batch = new ArrayList<>(records.count());
      for (ConsumerRecord<String, String> r : records) {
        batch.add("[" + r.partition() + ", " + r.offset() + ", " + Long.parseLong(r.value()) + "]");
        processed.put(new TopicPartition(r.topic(), r.partition()),
            new OffsetAndMetadata(r.offset() + 1));
      }
      // Processing = recording; only then is the position committed.
      line("\"msgs\": " + batch);
      commit(records.partitions());
    }
    consumer.close(CloseOptions.timeout(CLOSE_TIMEOUT));
    event("closed", List.of());
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 5) {
      System.err.println("usage: HeraldGroupMember BOOTSTRAP TOPIC GROUP NAME OUT_FILE");
      System.exit(2);
    }
    PrintWriter out = new PrintWriter(new OutputStreamWriter(
        new FileOutputStream(args[4], true), StandardCharsets.UTF_8));
    HeraldGroupMember member = new HeraldGroupMember(out);
    AtomicBoolean stopping = new AtomicBoolean();
    Thread main = Thread.currentThread();
    // SIGTERM: let the poll loop see the flag, close the consumer, and only then let the JVM go.
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      stopping.set(true);
      try {
        main.join(CLOSE_TIMEOUT.toMillis() + 10_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }));
    try {
      member.run(args[0], args[1], args[2], args[3], stopping);
    } catch (Exception e) {
      member.error("error", e);
      e.printStackTrace();
      out.close();
      if (!stopping.get()) {
        System.exit(1);
      }
      return;
    }
    out.close();
  }
}

import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A producer offering a fixed byte rate for a while, run by tests/compat/test_quota_enforcement.py
 * against a broker that holds its client id to a lower quota.
 *
 * <p>Usage: {@code HeraldQuotaProducer BOOTSTRAP TOPIC CLIENT_ID OFFERED_BYTES_PER_SEC SECONDS
 * RECORD_BYTES [PROPERTIES]}, PROPERTIES being more producer settings as {@code key=value}
 * pairs, one per line (SASL's, for one). Sends records of RECORD_BYTES at the offered rate (blocking in {@code send} once
 * its 2 MiB buffer is full, as a producer held back by its broker does), flushes, and prints one
 * line: {@code HERALD-QUOTA java sent=N errors=E first_error=... throttle_avg=A throttle_max=M}
 * where A and M are the producer's own {@code produce-throttle-time-avg} and {@code -max} metrics
 * read just before the flush (milliseconds).
 */
public final class HeraldQuotaProducer {
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String topic = args[1];
    String clientId = args[2];
    long offered = Long.parseLong(args[3]);
    double seconds = Double.parseDouble(args[4]);
    int recordBytes = Integer.parseInt(args[5]);

    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
    props.put(ProducerConfig.LINGER_MS_CONFIG, 5);
    props.put(ProducerConfig.BATCH_SIZE_CONFIG, 16384);
    props.put(ProducerConfig.BUFFER_MEMORY_CONFIG, 2 * 1024 * 1024);
    props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 60_000);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    if (args.length > 6) {
      for (String pair : args[6].split("\n")) {
        int eq = pair.indexOf('=');
        if (eq > 0) {
          props.put(pair.substring(0, eq), pair.substring(eq + 1));
        }
      }
    }

    AtomicLong errors = new AtomicLong();
    AtomicReference<String> firstError = new AtomicReference<>("none");
    byte[] value = new byte[recordBytes];
    java.util.Arrays.fill(value, (byte) 'x');
    long sent = 0;
    double throttleAvg;
    double throttleMax;
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
      long start = System.nanoTime();
      long end = start + (long) (seconds * 1e9);
      while (true) {
        long now = System.nanoTime();
        if (now >= end) {
          break;
        }
        // Records due by now at the offered rate.
        long due = (long) ((now - start) / 1e9 * offered / recordBytes);
        while (sent < due && System.nanoTime() < end) {
          producer.send(
              new ProducerRecord<>(topic, value),
              (metadata, error) -> {
                if (error != null) {
                  errors.incrementAndGet();
                  firstError.compareAndSet("none", error.toString().replace(' ', '_'));
                }
              });
          sent++;
        }
        Thread.sleep(1);
      }
      throttleAvg = metric(producer.metrics(), "produce-throttle-time-avg");
      throttleMax = metric(producer.metrics(), "produce-throttle-time-max");
      producer.flush();
    }
    System.out.printf(
        "HERALD-QUOTA java sent=%d errors=%d first_error=%s throttle_avg=%.1f throttle_max=%.1f%n",
        sent, errors.get(), firstError.get(), throttleAvg, throttleMax);
  }

  static double metric(Map<MetricName, ? extends Metric> metrics, String name) {
    for (Map.Entry<MetricName, ? extends Metric> entry : metrics.entrySet()) {
      if (entry.getKey().name().equals(name)
          && entry.getKey().group().equals("producer-metrics")) {
        Object value = entry.getValue().metricValue();
        return value instanceof Double ? (Double) value : Double.NaN;
      }
    }
    return Double.NaN;
  }
}

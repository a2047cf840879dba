import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's own Java producer (kafka-clients from the harness jars) running transactions, for logs that
 * only the Java client writes: from Kafka 4.0 it speaks transactions V2 (KIP-890 part 2), so every
 * transaction ends with a marker one producer epoch above its data. librdkafka does not.
 *
 * Run with the source launcher: java -cp KAFKA_LIB/* TransactionalProducer.java BOOTSTRAP TOPIC ID MODE [N]
 *   commits N   N transactions of 10 records over partitions 0 and 1; every 5th is aborted
 *   open        one committed transaction, then one left open (its records flushed); prints "open"
 *               and waits to be killed
 *   idle        3 committed transactions, then one left idle past transaction.timeout.ms (3 s) so
 *               the coordinator aborts it; the failed commit is reported, the producer re-initialised,
 *               and 3 more transactions committed
 *   copy SOURCE exactly-once consume-transform-produce: reads SOURCE's committed records (group ID,
 *               read_committed) and writes each to TOPIC's partition of the same number, one
 *               transaction per poll with the consumer's offsets (sendOffsetsToTransaction), until
 *               SOURCE has nothing new for 3 s; prints the number of records copied
 * Each step prints one line on stdout; any other failure exits non-zero with its stack trace.
 */
public final class TransactionalProducer {
    private static final int RECORDS_PER_TRANSACTION = 10;

    private static KafkaProducer<String, String> producer(String bootstrap, String id, int timeoutMs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("linger.ms", "2");
        p.put("transactional.id", id);
        p.put("transaction.timeout.ms", Integer.toString(timeoutMs));
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        return producer;
    }

    private static void send(KafkaProducer<String, String> producer, String topic, String tag) {
        for (int i = 0; i < RECORDS_PER_TRANSACTION; i++) {
            producer.send(new ProducerRecord<>(topic, i % 2, tag + "-" + i, "value-" + tag + "-" + i));
        }
    }

    private static void transaction(KafkaProducer<String, String> producer, String topic, String tag, boolean commit) {
        producer.beginTransaction();
        send(producer, topic, tag);
        producer.flush(); // every partition joins the transaction, so each gets its marker
        if (commit) {
            producer.commitTransaction();
        } else {
            producer.abortTransaction();
        }
        System.out.println((commit ? "committed " : "aborted ") + tag);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], id = args[2], mode = args[3];
        switch (mode) {
            case "commits" -> {
                int n = Integer.parseInt(args[4]);
                try (KafkaProducer<String, String> producer = producer(bootstrap, id, 60_000)) {
                    for (int t = 0; t < n; t++) transaction(producer, topic, id + "-" + t, t % 5 != 4);
                }
            }
            case "open" -> {
                KafkaProducer<String, String> producer = producer(bootstrap, id, 60_000);
                transaction(producer, topic, id + "-before", true);
                producer.beginTransaction();
                send(producer, topic, id + "-open");
                producer.flush();
                System.out.println("open");
                System.out.flush();
                Thread.sleep(600_000);
            }
            case "idle" -> {
                KafkaProducer<String, String> producer = producer(bootstrap, id, 3_000);
                for (int t = 0; t < 3; t++) transaction(producer, topic, id + "-a" + t, true);
                producer.beginTransaction();
                send(producer, topic, id + "-idle");
                producer.flush();
                Thread.sleep(15_000);
                try {
                    producer.commitTransaction();
                    System.out.println("late commit accepted");
                } catch (Exception e) {
                    System.out.println("late commit refused: " + e.getClass().getSimpleName());
                    producer.close();
                    producer = producer(bootstrap, id, 3_000);
                }
                for (int t = 0; t < 3; t++) transaction(producer, topic, id + "-b" + t, true);
                producer.close();
            }
            case "copy" -> {
                String source = args[4];
                Properties c = new Properties();
                c.put("bootstrap.servers", bootstrap);
                c.put("group.id", id);
                c.put("isolation.level", "read_committed");
                c.put("enable.auto.commit", "false");
                c.put("auto.offset.reset", "earliest");
                c.put("max.poll.records", "10"); // several transactions, each with its offsets
                c.put("key.deserializer", StringDeserializer.class.getName());
                c.put("value.deserializer", StringDeserializer.class.getName());
                int copied = 0;
                try (KafkaProducer<String, String> producer = producer(bootstrap, id, 60_000);
                        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
                    consumer.subscribe(List.of(source));
                    long quietSince = System.nanoTime();
                    while (System.nanoTime() - quietSince < 3_000_000_000L || copied == 0) {
                        ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                        if (records.isEmpty()) continue;
                        quietSince = System.nanoTime();
                        producer.beginTransaction();
                        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                        for (ConsumerRecord<String, String> r : records) {
                            producer.send(new ProducerRecord<>(topic, r.partition(), r.key(), r.value()));
                            offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                            copied++;
                        }
                        producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                        producer.commitTransaction();
                    }
                }
                System.out.println("copied " + copied);
            }
            default -> throw new IllegalArgumentException("unknown mode " + mode);
        }
    }
}

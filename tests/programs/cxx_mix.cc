/*
 * cxx_mix [THREADS] [ROUNDS] - a multi-threaded C++ program: each thread
 * (default 4) builds a std::map<std::string, std::string> of 300 entries
 * with heap-allocated keys and values, erases half, and runs a throw/catch
 * loop (ROUNDS, default 2000) of std::runtime_error with a long message.
 * Prints one deterministic checksum line per thread and a total, so its
 * output under the recorder must be identical to its output without it
 * (and the exceptions must unwind through libgcc, not the recorder's
 * libunwind).
 */
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

static unsigned long work(int id, int rounds)
{
	std::map<std::string, std::string> m;
	for (int k = 0; k < 300; k++)
		m["a fairly long key number " + std::to_string(k) + " of thread " + std::to_string(id)] =
			std::string(40 + k % 17, char('a' + k % 26));
	for (int k = 0; k < 300; k += 2)
		m.erase("a fairly long key number " + std::to_string(k) + " of thread " + std::to_string(id));
	unsigned long sum = 0;
	for (auto &kv : m)
		sum = sum * 31 + kv.first.size() * 7 + kv.second.size();
	for (int r = 0; r < rounds; r++) {
		try {
			if (r % 3 != 7)
				throw std::runtime_error("round " + std::to_string(r) + " failed on purpose, thread " +
							 std::to_string(id));
		} catch (const std::exception &e) {
			sum += std::string(e.what()).size();
		}
	}
	return sum;
}

int main(int argc, char **argv)
{
	int nthreads = argc > 1 ? std::stoi(argv[1]) : 4;
	int rounds = argc > 2 ? std::stoi(argv[2]) : 2000;
	std::vector<unsigned long> sums(nthreads);
	std::vector<std::thread> ts;
	for (int i = 0; i < nthreads; i++)
		ts.emplace_back([&sums, i, rounds] { sums[i] = work(i, rounds); });
	for (auto &t : ts)
		t.join();
	unsigned long total = 0;
	for (int i = 0; i < nthreads; i++) {
		std::printf("thread %d checksum %lu\n", i, sums[i]);
		total += sums[i];
	}
	std::printf("total %lu\n", total);
	return 0;
}

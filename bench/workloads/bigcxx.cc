// bigcxx.cc - a C++ source for bench/run.py's compile workload (g++ -O1
// -c, timed as cc1plus alone): most of libstdc++'s headers, and enough
// templates instantiated from them (containers, algorithms, iostreams,
// variant, function, async) that the compiler's own allocations,
// under its deep recursive-descent stacks, are what is measured. Never
// linked or run.
#include <algorithm>
#include <any>
#include <array>
#include <atomic>
#include <bitset>
#include <chrono>
#include <complex>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iomanip>
#include <iostream>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <queue>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <valarray>
#include <variant>
#include <vector>

namespace bench {

template <typename K, typename V>
std::map<K, std::vector<V>> group(const std::vector<std::pair<K, V>> &in)
{
	std::map<K, std::vector<V>> out;
	for (const auto &[k, v] : in)
		out[k].push_back(v);
	for (auto &[k, vs] : out)
		std::sort(vs.begin(), vs.end());
	return out;
}

template <typename T>
std::string describe(const T &x)
{
	std::ostringstream os;
	os << std::setw(8) << std::fixed << std::setprecision(3) << x;
	return os.str();
}

using Value = std::variant<int, double, std::string, std::vector<int>>;

std::string show(const Value &v)
{
	return std::visit([](const auto &x) -> std::string {
		using T = std::decay_t<decltype(x)>;
		if constexpr (std::is_same_v<T, std::vector<int>>)
			return std::to_string(std::accumulate(x.begin(), x.end(), 0));
		else if constexpr (std::is_same_v<T, std::string>)
			return x;
		else
			return describe(x);
	}, v);
}

std::vector<std::string> tokens(const std::string &s)
{
	std::vector<std::string> out;
	std::string_view v(s);
	while (!v.empty()) {
		auto n = std::find_if(v.begin(), v.end(), [](char c) { return c == ' '; }) - v.begin();
		if (n)
			out.emplace_back(v.substr(0, (size_t)n));
		v.remove_prefix(std::min(v.size(), (size_t)n + 1));
	}
	return out;
}

std::unordered_map<std::string, std::set<int>> index(const std::vector<std::string> &lines)
{
	std::unordered_map<std::string, std::set<int>> out;
	int n = 0;
	for (const auto &l : lines) {
		for (auto &t : tokens(l))
			out[t].insert(n);
		n++;
	}
	return out;
}

double simulate(unsigned seed, int steps)
{
	std::mt19937_64 rng(seed);
	std::normal_distribution<double> d(0.0, 1.0);
	std::deque<std::complex<double>> q;
	std::priority_queue<double> best;
	for (int i = 0; i < steps; i++) {
		q.emplace_back(d(rng), d(rng));
		if (q.size() > 16)
			q.pop_front();
		best.push(std::abs(std::accumulate(q.begin(), q.end(), std::complex<double>())));
	}
	return best.empty() ? 0 : best.top();
}

std::future<double> later(unsigned seed)
{
	return std::async(std::launch::async, simulate, seed, 1000);
}

struct Shape {
	virtual ~Shape() = default;
	virtual double area() const = 0;
};

template <int N>
struct Poly : Shape {
	std::array<std::pair<double, double>, N> pts{};
	double area() const override
	{
		double a = 0;
		for (int i = 0; i < N; i++)
			a += pts[i].first * pts[(i + 1) % N].second - pts[(i + 1) % N].first * pts[i].second;
		return a / 2;
	}
};

std::vector<std::unique_ptr<Shape>> shapes()
{
	std::vector<std::unique_ptr<Shape>> v;
	v.push_back(std::make_unique<Poly<3>>());
	v.push_back(std::make_unique<Poly<4>>());
	v.push_back(std::make_unique<Poly<5>>());
	v.push_back(std::make_unique<Poly<6>>());
	v.push_back(std::make_unique<Poly<8>>());
	return v;
}

std::map<std::string, std::function<Value(const std::vector<Value> &)>> builtins()
{
	std::map<std::string, std::function<Value(const std::vector<Value> &)>> b;
	b["count"] = [](const std::vector<Value> &a) -> Value { return (int)a.size(); };
	b["join"] = [](const std::vector<Value> &a) -> Value {
		std::string s;
		for (const auto &x : a)
			s += show(x);
		return s;
	};
	b["sum"] = [](const std::vector<Value> &a) -> Value {
		double t = 0;
		for (const auto &x : a)
			if (auto p = std::get_if<double>(&x))
				t += *p;
		return t;
	};
	return b;
}

std::optional<std::filesystem::path> find(const std::filesystem::path &dir, const std::string &name)
{
	std::error_code ec;
	for (const auto &e : std::filesystem::recursive_directory_iterator(dir, ec))
		if (e.path().filename() == name)
			return e.path();
	return std::nullopt;
}

void report(std::ostream &os, const std::vector<std::string> &lines)
{
	auto idx = index(lines);
	std::vector<std::pair<std::string, int>> pairs;
	for (const auto &[k, s] : idx)
		pairs.emplace_back(k, (int)s.size());
	auto g = group(pairs);
	std::mutex m;
	std::lock_guard<std::mutex> lock(m);
	for (const auto &[k, v] : g)
		os << std::quoted(k) << ' ' << describe(v.size()) << '\n';
	std::list<std::tuple<int, std::string, double>> rows;
	std::unordered_set<std::string> seen;
	for (const auto &l : lines)
		if (seen.insert(l).second)
			rows.emplace_back((int)l.size(), l, simulate((unsigned)l.size(), 10));
	rows.sort();
	std::bitset<64> bits;
	std::valarray<double> va(rows.size());
	size_t i = 0;
	for (const auto &r : rows) {
		bits.set(std::get<0>(r) % 64);
		va[i++] = std::get<2>(r);
	}
	os << bits << ' ' << va.sum() << ' ' << std::any_cast<int>(std::any(3)) << '\n';
	std::atomic<int> done{0};
	std::thread t([&] { done = 1; });
	t.join();
	auto f = later(7);
	os << f.get() << ' ' << shapes().size() << ' ' << builtins().size() << '\n';
	if (auto p = find(".", "x"))
		os << *p << '\n';
	std::ifstream in("x");
	std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
	os << std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace bench

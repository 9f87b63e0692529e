#include "synth/content.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <vector>

namespace diffnet::synth::content {
namespace {

const std::vector<std::string> kFirst = {
    "Maria", "James", "Anna", "Thomas", "Sofia", "Lukas", "Emma", "Daniel", "Olivia", "Mateo", "Chloe",
    "Ahmed", "Fatima", "Wei", "Mei", "Ivan", "Elena", "Pierre", "Claire", "Jonas", "Laura", "Marco",
    "Giulia", "Sean", "Aoife", "Ravi", "Priya", "Kenji", "Yuki", "Noah", "Lea", "Hugo", "Ines", "Omar",
    "Sara", "Peter", "Hanna", "David", "Julia", "Carlos", "Lucia", "Tomasz", "Zofia", "Erik", "Ingrid"};
const std::vector<std::string> kLast = {
    "Keller", "Smith", "Novak", "Garcia", "Rossi", "Dubois", "Jensen", "Kowalski", "Nguyen", "Chen",
    "Tanaka", "Okafor", "Haddad", "Murphy", "Schmidt", "Lindqvist", "Moreau", "Costa", "Fischer",
    "Petrov", "Silva", "Weber", "Brown", "Wilson", "Martin", "Larsen", "Horvat", "Meyer", "Patel",
    "Kim", "Ali", "Bianchi", "Janssen", "Walsh", "Romero", "Nowak", "Hoffmann", "Laurent", "Berg"};
const std::vector<std::string> kCompanyA = {
    "Northwind", "Bluebay", "Silverline", "Greenfield", "Redstone", "Brightway", "Oakridge", "Sunrise",
    "Harbor", "Summit", "Pioneer", "Evergreen", "Granite", "Crescent", "Atlas", "Meridian", "Falcon",
    "Cedar", "Horizon", "Keystone", "Lakeside", "Nordic", "Alpine", "Coastal", "Metro", "Union"};
const std::vector<std::string> kCompanyB = {
    "Logistics", "Trading", "Consulting", "Foods", "Electronics", "Services", "Supplies", "Systems",
    "Bakery", "Pharmacy", "Hardware", "Motors", "Textiles", "Solutions", "Catering", "Printing",
    "Energy", "Market", "Partners", "Builders", "Software", "Optics", "Furniture", "Travel"};
const std::vector<std::string> kCompanyC = {"GmbH", "Ltd", "Inc.", "S.A.", "B.V.", "LLC", "AG",
                                            "SARL", "Sdn. Bhd.", "& Co.", "plc", "Oy", "AB"};
const std::vector<std::string> kStreets = {
    "Harbour Road", "Main Street", "Station Street", "Mill Lane", "King Street", "Park Avenue",
    "Bahnhofstrasse", "Rue de la Paix", "Via Roma", "Calle Mayor", "High Street", "Church Road",
    "Market Square", "Elm Street", "Lindenweg", "Jalan Ampang", "Oak Avenue", "River Walk", "Queens Road"};
const std::vector<std::string> kCities = {
    "Berlin", "London", "Paris", "Madrid", "Rome", "Vienna", "Dublin", "Amsterdam", "Warsaw", "Prague",
    "Lisbon", "Oslo", "Helsinki", "Zurich", "Munich", "Lyon", "Milan", "Kuala Lumpur", "Boston",
    "Toronto", "Manchester", "Hamburg", "Brussels", "Copenhagen", "Stockholm", "Porto"};
const std::vector<std::string> kItems = {
    "Espresso beans", "Printer paper A4", "USB-C cable", "Office chair", "Green tea", "Croissant",
    "Mineral water", "Toner cartridge", "Consulting hours", "Delivery fee", "Desk lamp", "Notebook",
    "Ballpoint pens", "Sandwich", "Orange juice", "Monitor 27in", "Software licence", "Cleaning service",
    "Rice 5kg", "Chicken curry", "Fried noodles", "Iced coffee", "Batteries AA", "Hand soap",
    "Maintenance", "Hosting plan", "Travel expenses", "Parking", "Bread roll", "Milk 1L", "Apples",
    "Shampoo", "Keyboard", "Design work", "Translation", "Freight", "Packaging", "Installation"};
const std::vector<std::string> kUnits = {"", "", "", " 1kg", " 500g", " x2", " (box)", " 12pk", " L"};
const std::vector<std::string> kBanks = {"First Meridian Bank", "Union Savings Bank", "Nordic Credit",
                                         "Atlas Banking Corp.", "Crescent Bank", "Alpine Kantonalbank",
                                         "Harbor Trust", "Keystone Federal", "Lakeside Cooperative Bank"};
const std::vector<std::string> kTxn = {"CARD PAYMENT", "DIRECT DEBIT", "TRANSFER", "STANDING ORDER",
                                       "ATM WITHDRAWAL", "SALARY", "REFUND", "ONLINE PAYMENT", "FEE"};
const std::vector<std::string> kMerchants = {"SUPERMARKET", "PETROL STATION", "ELECTRICITY", "RENT",
                                             "INSURANCE", "PHARMACY", "RESTAURANT", "BOOKSHOP",
                                             "TELECOM", "GYM", "TRAIN TICKETS", "HARDWARE STORE"};
const std::vector<std::string> kJobs = {"Accountant", "Engineer", "Sales Manager", "Technician",
                                        "Consultant", "Nurse", "Analyst", "Designer", "Driver", "Clerk"};
const std::vector<std::string> kWords = {
    "the", "invoice", "payment", "account", "please", "find", "attached", "regarding", "our", "your",
    "order", "delivery", "contract", "balance", "due", "within", "days", "we", "confirm", "receipt",
    "of", "and", "for", "to", "in", "with", "amount", "period", "services", "as", "agreed", "terms",
    "conditions", "reference", "kindly", "transfer", "date", "statement", "customer", "support",
    "request", "record", "notice", "schedule", "review", "approved", "total", "this", "letter", "is"};
const std::vector<std::string> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

char rand_digit(Rng& r) { return static_cast<char>('0' + r.randint(0, 9)); }

}  // namespace

std::string person_name(Rng& r) { return r.pick(kFirst) + " " + r.pick(kLast); }
std::string company_name(Rng& r) {
  return r.pick(kCompanyA) + " " + r.pick(kCompanyB) + " " + r.pick(kCompanyC);
}
std::string street_line(Rng& r) { return std::to_string(r.randint(1, 240)) + " " + r.pick(kStreets); }
std::string city_line(Rng& r) { return std::to_string(r.randint(10000, 99999)) + " " + r.pick(kCities); }
std::string phone(Rng& r) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "+%d %d %04d %04d", int(r.randint(1, 60)), int(r.randint(10, 99)),
                int(r.randint(0, 9999)), int(r.randint(0, 9999)));
  return buf;
}
std::string email(Rng& r, const std::string& name) {
  std::string s;
  for (char c : name) s += c == ' ' ? '.' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::vector<std::string> dom = {"mail.com", "example.org", "corp.net", "post.eu"};
  return s + "@" + r.pick(dom);
}

std::string date(Rng& r, int style) {
  int y = static_cast<int>(r.randint(2015, 2025)), m = static_cast<int>(r.randint(1, 12)),
      d = static_cast<int>(r.randint(1, 28));
  if (style < 0) style = static_cast<int>(r.randint(0, 3));
  char buf[32];
  switch (style) {
    case 0: std::snprintf(buf, sizeof buf, "%04d-%02d-%02d", y, m, d); break;
    case 1: std::snprintf(buf, sizeof buf, "%02d.%02d.%04d", d, m, y); break;
    case 2: std::snprintf(buf, sizeof buf, "%02d/%02d/%04d", d, m, y); break;
    default: std::snprintf(buf, sizeof buf, "%02d %s %04d", d, kMonths[m - 1].c_str(), y); break;
  }
  return buf;
}

std::string format_amount(double v, bool european) {
  bool neg = v < 0;
  long long cents = std::llround(std::fabs(v) * 100);
  std::string whole = std::to_string(cents / 100);
  std::string grouped;
  int n = static_cast<int>(whole.size());
  for (int i = 0; i < n; ++i) {
    grouped += whole[i];
    int left = n - 1 - i;
    if (left > 0 && left % 3 == 0) grouped += european ? '.' : ',';
  }
  char frac[8];
  std::snprintf(frac, sizeof frac, "%02lld", cents % 100);
  return (neg ? "-" : "") + grouped + (european ? "," : ".") + frac;
}

std::string amount(Rng& r, double lo, double hi, bool european) {
  // Log-uniform: small amounts are more common than large ones.
  double v = std::exp(r.uniform(std::log(lo), std::log(hi)));
  return format_amount(v, european);
}

std::string iban(Rng& r) {
  static const std::vector<std::string> cc = {"DE", "FR", "GB", "NL", "ES", "IT", "AT", "BE", "IE", "PL"};
  std::string s = r.pick(cc);
  s += rand_digit(r);
  s += rand_digit(r);
  int groups = static_cast<int>(r.randint(4, 6));
  for (int g = 0; g < groups; ++g) {
    s += ' ';
    for (int k = 0; k < 4; ++k) s += rand_digit(r);
  }
  return s;
}

std::string reference(Rng& r, const std::string& prefix) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s-%d-%05d", prefix.c_str(), int(r.randint(2015, 2025)),
                int(r.randint(1, 99999)));
  return buf;
}

std::string item_name(Rng& r) { return r.pick(kItems) + r.pick(kUnits); }
std::string bank_name(Rng& r) { return r.pick(kBanks); }
std::string transaction_text(Rng& r) {
  return r.pick(kTxn) + " " + r.pick(kMerchants) + " " + std::to_string(r.randint(1000, 9999));
}
std::string job_title(Rng& r) { return r.pick(kJobs); }
std::string word(Rng& r) { return r.pick(kWords); }

std::string sentence(Rng& r) {
  int n = static_cast<int>(r.randint(6, 16));
  std::string s;
  for (int i = 0; i < n; ++i) {
    std::string w = r.pick(kWords);
    if (i == 0) w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
    if (r.bernoulli(0.06)) w = amount(r, 10, 5000);
    else if (r.bernoulli(0.04)) w = date(r);
    s += (i ? " " : "") + w;
  }
  return s + ".";
}

std::string randomize_like(Rng& r, const std::string& text) {
  bool has_alnum = false;
  for (char c : text) has_alnum |= std::isalnum(static_cast<unsigned char>(c)) != 0;
  if (!has_alnum) return text;
  for (int attempt = 0; attempt < 64; ++attempt) {
    std::string out = text;
    for (auto& c : out) {
      unsigned char u = static_cast<unsigned char>(c);
      if (std::isdigit(u)) c = rand_digit(r);
      else if (std::isupper(u)) c = static_cast<char>('A' + r.randint(0, 25));
      else if (std::islower(u)) c = static_cast<char>('a' + r.randint(0, 25));
    }
    if (out != text) return out;
  }
  // Deterministic fallback: bump the first alphanumeric character.
  std::string out = text;
  for (auto& c : out) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isdigit(u)) { c = c == '9' ? '0' : static_cast<char>(c + 1); break; }
    if (std::isalpha(u)) { c = (c == 'z' || c == 'Z') ? static_cast<char>(c - 25) : static_cast<char>(c + 1); break; }
  }
  return out;
}

namespace {
// Another real word or name of about the same length in the same case pattern; "" when none.
std::string similar_word(Rng& r, const std::string& core) {
  int letters = 0, upper = 0;
  for (char c : core) {
    unsigned char u = static_cast<unsigned char>(c);
    letters += std::isalpha(u) != 0;
    upper += std::isupper(u) != 0;
  }
  if (letters == 0) return "";
  bool capital = std::isupper(static_cast<unsigned char>(core[0])) != 0;
  bool all_upper = upper == letters && letters > 1;
  const std::vector<std::string>* pools[] = {&kFirst, &kLast, &kCities, &kWords, &kCompanyA, &kCompanyB, &kJobs};
  for (int attempt = 0; attempt < 200; ++attempt) {
    const auto& pool = *pools[capital ? r.randint(0, 6) : 3];
    std::string w = r.pick(pool);
    if (w.find(' ') != std::string::npos || std::abs(int(w.size()) - int(core.size())) > 1) continue;
    for (auto& c : w) {
      unsigned char u = static_cast<unsigned char>(c);
      c = static_cast<char>(all_upper ? std::toupper(u) : std::tolower(u));
    }
    if (capital && !all_upper) w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
    if (w != core) return w;
  }
  return "";
}
}  // namespace

std::string replacement_for(Rng& r, const std::string& text) {
  int digits = 0, letters = 0;
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    digits += std::isdigit(u) != 0;
    letters += std::isalpha(u) != 0;
  }
  if (letters + digits == 0) return text;
  // Numbers, amounts, dates, codes: new digits, letters and layout kept (what a fraudster changes).
  if (digits > 0) {
    for (int attempt = 0; attempt < 64; ++attempt) {
      std::string out = text;
      for (auto& c : out)
        if (std::isdigit(static_cast<unsigned char>(c))) c = rand_digit(r);
      if (out != text) return out;
    }
    return randomize_like(r, text);
  }
  // Words: one word (of a multi-word segment) becomes another real word or name of similar length.
  std::vector<std::pair<size_t, size_t>> spans;  // alphabetic runs
  for (size_t i = 0; i < text.size();) {
    if (!std::isalpha(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && std::isalpha(static_cast<unsigned char>(text[j]))) ++j;
    spans.push_back({i, j});
    i = j;
  }
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto sp = r.pick(spans);
    std::string w = similar_word(r, text.substr(sp.first, sp.second - sp.first));
    if (!w.empty()) return text.substr(0, sp.first) + w + text.substr(sp.second);
  }
  return randomize_like(r, text);
}

}  // namespace diffnet::synth::content

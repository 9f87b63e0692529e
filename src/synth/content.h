// Realistic document content for rendered pages and text edits: names, companies, addresses, dates,
// amounts, IBAN-like numbers, item lines, prose. All draws come from the caller's Rng.
#pragma once

#include <string>

#include "synth/rng.h"

namespace diffnet::synth::content {

std::string person_name(Rng& rng);          // "Maria Keller"
std::string company_name(Rng& rng);         // "Northwind Logistics GmbH"
std::string street_line(Rng& rng);          // "42 Harbour Road"
std::string city_line(Rng& rng);            // "10115 Berlin"
std::string phone(Rng& rng);                // "+44 20 7946 0321"
std::string email(Rng& rng, const std::string& name);
// Date in one of several styles (style < 0: random): 2023-04-17, 17.04.2023, 17/04/2023, 17 Apr 2023.
std::string date(Rng& rng, int style = -1);
// Amount with 2 decimals and thousands separators, e.g. "1,234.50" (or "1.234,50" when european).
std::string amount(Rng& rng, double lo, double hi, bool european = false);
std::string format_amount(double v, bool european = false);
std::string iban(Rng& rng);                 // "DE44 5001 0517 5407 3249 31"
std::string reference(Rng& rng, const std::string& prefix);  // "INV-2023-00417"
std::string item_name(Rng& rng);            // "Espresso beans 1kg"
std::string bank_name(Rng& rng);
std::string transaction_text(Rng& rng);     // "CARD PAYMENT SUPERMARKET 0417"
std::string job_title(Rng& rng);
std::string sentence(Rng& rng);             // a business-letter sentence
std::string word(Rng& rng);                 // a plain word for filler text
// Same shape, new characters: each digit -> a random digit, each letter -> a random letter of the
// same case; other characters kept. Differs from `text` whenever it holds a letter or digit.
std::string randomize_like(Rng& rng, const std::string& text);
// A plausible replacement for a field: an amount for amounts, a date for dates, a name for names...
// (falls back to randomize_like). Always differs from `text` when it holds a letter or digit.
std::string replacement_for(Rng& rng, const std::string& text);

}  // namespace diffnet::synth::content

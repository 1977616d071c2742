// Which sanitizer this translation unit is built with, as 0/1 macros that
// GCC and Clang agree on: GCC defines __SANITIZE_ADDRESS__ and
// __SANITIZE_THREAD__, Clang answers __has_feature (GCC only from 14).
//   DEPENGINE_ASAN  AddressSanitizer
//   DEPENGINE_TSAN  ThreadSanitizer
// Macros, not constants, so that code the sanitizer cannot build (a fence
// that TSan rejects under -Werror) can be left out with #if.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define DEPENGINE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DEPENGINE_ASAN 1
#endif
#endif
#ifndef DEPENGINE_ASAN
#define DEPENGINE_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define DEPENGINE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DEPENGINE_TSAN 1
#endif
#endif
#ifndef DEPENGINE_TSAN
#define DEPENGINE_TSAN 0
#endif

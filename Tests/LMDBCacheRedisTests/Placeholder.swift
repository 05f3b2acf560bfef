#if Redis
#endif
